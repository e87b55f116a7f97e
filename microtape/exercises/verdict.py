"""The verdict over all trials: which outputs stayed right, the first failure, and the feedback text."""

from typing import Any

from .result import CheckResult, StepResult

__all__ = ["Verdict"]


#: How bad a step's state is, over the trials: a step takes its worst trial's state.
_RANK = {"right": 0, "carried": 1, "wrong": 2, "missing": 3}


class Verdict:
    """Collects the trials: which outputs stayed right, and the first failure to explain.

    A stepped exercise's steps also keep their state (``right`` < ``carried``
    < ``wrong`` < ``missing``: each step takes its worst over the trials).
    """

    def __init__(self, exercise: Any, hidden: Any) -> None:
        self.exercise = exercise
        self.hidden = hidden
        self.right = {output.name: True for output in exercise.outputs}
        self.states = {output.name: "right" for output in exercise.outputs}
        self.trials_run = 0
        # (trial, message or where, problems, exception) of the first failing trial
        self.first: tuple[Any, Any, Any, Any] | None = None
        self.later_crash: str | None = None
        self.crash = False
        self.worst = 0.0
        self.key = None  # what drew the trials (kept in the result, for the picture)
        self.notes: list[Any] = []  # keys of a returned dict that are not as asked (missing, misspelled, extra)

    def crashed(self, message: str, trial: Any, exception: Any) -> None:
        """The function raised or returned something unusable: no output is right."""
        self.trials_run = trial + 1
        self.crash = True  # a crash takes every output's points
        for name in self.right:
            self.right[name] = False
            if self.first is None:  # no trial was judged: no step has a state of its own but wrong
                self.states[name] = "wrong"
        if self.first is None:
            self.first = (trial, message, [], exception)
        else:
            self.later_crash = message

    def trial_done(self, trial: Any, where: str, problems: Any, error: Any, states: Any = None) -> None:
        self.trials_run = trial + 1
        for problem in problems:
            self.right[problem.output] = False
        for name, state in (states or {}).items():
            if state != "right":
                self.right[name] = False
            if _RANK[state] > _RANK[self.states[name]]:
                self.states[name] = state
        failed = bool(problems) or any(state != "right" for state in (states or {}).values())
        if failed and self.first is None:
            # The message is written at the end, when it is known which outputs stayed right
            # on *every* trial: the headline must say what the score table says.
            self.first = (trial, where, problems, None)
        if not problems:
            self.worst = max(self.worst, error)

    def credited(self, name: str) -> Any:
        """True when the output ``name`` earns its points: right, or carried in an exercise that carries forward."""
        if not self.exercise.stepped or self.crash:
            return self.right[name]
        state = self.states[name]
        return state == "right" or (state == "carried" and self.exercise.carry_forward and not self.crash)

    def finish(
        self,
        message: str | None = None,
        trials_run: Any = None,
        trial: Any = None,
        *,
        exception: Any = None,
        status: Any = None,
    ) -> CheckResult:
        exercise = self.exercise
        name = exercise.name
        trials_run = self.trials_run if trials_run is None else trials_run
        if status is not None:  # not started / not checked: no output earns its points
            outputs = {output.name: False for output in exercise.outputs}
            return CheckResult(name, False, message, trials_run, trial, exception=exception, status=status,  # type: ignore[arg-type]  # a status comes with its message
                               outputs=outputs, max_score=exercise.max_score, hidden=self.hidden)  # fmt: skip
        if message is not None:  # the function could not even be called
            outputs = {output.name: False for output in exercise.outputs}
            return CheckResult(name, False, message, trials_run, outputs=outputs,
                               max_score=exercise.max_score, hidden=self.hidden)  # fmt: skip
        credited = {output.name: self.credited(output.name) for output in exercise.outputs}
        score = sum(output.points for output in exercise.outputs if credited[output.name])
        steps = self._steps() if exercise.stepped else ()
        if self.first is None:
            inputs = f"{'hidden ' if self.hidden else ''}random input{'s' if trials_run > 1 else ''}"
            message = f"✓ {name}: correct on {trials_run} {inputs} (max |yours − tape| = {self.worst:.1e})."
            return CheckResult(name, True, message, trials_run, max_abs_error=self.worst, status="right",
                               outputs=credited, score=score, max_score=exercise.max_score,
                               hidden=self.hidden, steps=steps, trial_key=self.key)  # fmt: skip
        trial, message, problems, exception = self.first
        right = [output.name for output in exercise.outputs if self.right[output.name]]
        wrong_links, carried = (), ()
        judged = exercise.stepped and exception is None and not message.startswith("✗")
        if judged:  # (the first failing trial was judged, not a crash)
            wrong_links = tuple(step.name for step in steps if step.state == "wrong")
            carried = tuple(step.name for step in steps if step.state == "carried")
            message = self._stepped_message(message, problems)
        elif problems:
            message = _failure_message(name, message, problems, right, self.notes)
        if self.later_crash:
            # The crash of a later trial keeps the line naming where in the student's file it raised.
            crash = self.later_crash.lstrip("✗ ").split("\n")
            place = [line.strip() for line in crash[2:] if line.lstrip().startswith("at line")]
            message += "\n  and later: " + " ".join(crash[:2] + place[:1])
        status = "partly right" if score else "wrong"
        message += "\n  " + self._score_line(score, trials_run)
        mistakes = tuple(dict.fromkeys(d.name for p in problems for d in p.diagnoses))
        return CheckResult(name, False, message, trials_run, trial, problems, mistakes, exception, status=status,
                           outputs=credited, score=score, max_score=exercise.max_score,
                           hidden=self.hidden, steps=steps, first_wrong=wrong_links[0] if wrong_links else None,
                           computed_from_wrong=carried, wrong_links=wrong_links, trial_key=self.key)  # fmt: skip

    def _steps(self) -> Any:
        """The StepResults, in derivation order."""
        return tuple(
            StepResult(
                output.name,
                self.states[output.name] == "right",
                output.points if self.credited(output.name) else 0,
                output.points,
                output.after,
                self.states[output.name],
                output.node,
            )  # fmt: skip
            for output in self.exercise.outputs
        )

    def _named(self, state: Any) -> Any:
        return [output.name for output in self.exercise.outputs if self.states[output.name] == state]

    def _stepped_message(self, where: str, problems: Any) -> Any:
        """A stepped exercise's feedback: every wrong link in order, the carried steps, the missing ones."""
        exercise = self.exercise
        wrong, carried = self._named("wrong"), self._named("carried")
        right, missing = self._named("right"), self._named("missing")
        parts = []
        if wrong:
            parts.append(f"{wrong[0]} is the first wrong step")
            if wrong[1:]:
                parts[-1] += f" ({_join(wrong[1:])} {_is(wrong[1:])} wrong too, at {_its(wrong[1:])} own link)"
        if missing:
            parts.append(f"{_join(missing)} {_is(missing)} missing")
        if carried:
            parts.append(f"{_join(carried)} {_is(carried)} carried")
        if right:
            parts.append(f"{_join(right)} {_is(right)} right")
        lines = [f"✗ {exercise.name}: " + "; ".join(parts) + "."]
        lines += [f"  {note}" for note in self.notes]
        lines.append(f"  {where}")
        lines += [f"  {problem.text}" for problem in problems]
        if carried:
            credit = ("they earn their points: error carried forward" if exercise.carry_forward
                      else "this exercise does not carry errors forward: no points for them")  # fmt: skip
            if len(carried) == 1:
                credit = credit.replace("they earn their", "it earns its").replace("for them", "for it")
            sources = [s for s in dict.fromkeys(u for c in carried for u in exercise.depends_on(c)) if s in wrong]
            came = f"your {_join(sources)}" if sources else "your wrong upstream steps"
            lines.append(f"  {_join(carried)} {_is(carried)} right from {came}: the link{'s'[:len(carried) > 1]} "
                         f"into {'them' if len(carried) > 1 else 'it'} {'are' if len(carried) > 1 else 'is'} "
                         f"right, the error came from upstream ({credit}).")  # fmt: skip
        shown: dict[Any, Any] = {}
        for problem in problems:
            for diagnosis in problem.diagnoses:
                shown.setdefault(diagnosis.hint, (diagnosis, []))[1].append(problem.output)
        for diagnosis, outputs in shown.values():
            lines.append(f"  hint — {diagnosis.label} (at {', '.join(outputs)}): {diagnosis.hint}")
        if wrong and not shown:
            lines.append(f"  (no known mistake matches: go through the link into {wrong[0]} again)")
        return "\n".join(lines)

    def _score_line(self, score: Any, trials_run: Any) -> Any:
        exercise = self.exercise
        line = f"score {score} of {exercise.max_score}"
        if not exercise.stepped:
            names = [output.name for output in exercise.outputs]
            good = [n for n in names if self.right[n]]
            bad = [n for n in names if not self.right[n]]
            if good and bad:
                line += f": {_join(good)} right on all {trials_run} trials; {_join(bad)} not yet."
            elif bad:
                line += "."
            return line
        earned = [n for n in self.right if self.credited(n)]
        rest = [n for n in self.right if not self.credited(n)]
        if earned and rest:
            return line + f": {_join(earned)} earn{'s'[: len(earned) == 1]} points; {_join(rest)} not yet."
        return line + "."


def _failure_message(name: str, where: str, problems: Any, right: Any, notes: Any = ()) -> Any:
    wrong = [problem.output for problem in problems]
    headline = f"✗ {name}: {_join(wrong)} {'is' if len(wrong) == 1 else 'are'} wrong"
    if right:
        headline += f"; {_join(right)} {'is' if len(right) == 1 else 'are'} right"
    lines = [headline + ".", *[f"  {note}" for note in notes], f"  {where}"]
    for problem in problems:
        lines.append(f"  {problem.text}")
    shown: dict[Any, Any] = {}
    for problem in problems:
        for diagnosis in problem.diagnoses:
            shown.setdefault(diagnosis.hint, (diagnosis, []))[1].append(problem.output)
    for diagnosis, outputs in shown.values():
        lines.append(f"  hint — {diagnosis.label} ({', '.join(outputs)}): {diagnosis.hint}")
    if not shown:
        lines.append("  (no known mistake matches: go through the chain in the prompt one link at a time)")
    return "\n".join(lines)


def _is(names: Any) -> Any:
    return "is" if len(names) == 1 else "are"


def _its(names: Any) -> Any:
    return "its" if len(names) == 1 else "their"


def _join(names: Any) -> Any:
    names = list(names)
    if len(names) == 1:
        return names[0]
    return ", ".join(names[:-1]) + " and " + names[-1]
