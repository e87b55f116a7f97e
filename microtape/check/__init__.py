"""Checking derivatives: finite differences, and step-by-step reports.

``gradcheck`` compares a taped gradient with central finite differences.
"""

from .gradcheck import GradcheckResult, gradcheck, numeric_gradient

__all__ = ["gradcheck", "GradcheckResult", "numeric_gradient"]
