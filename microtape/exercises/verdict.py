"""The verdict over all trials: which outputs stayed right, the first failure, and the feedback text."""

from typing import Any

from .result import CheckResult, StepResult

__all__ = ["Verdict"]


class Verdict:
    """Collects the trials: which outputs stayed right, and the first failure to explain."""

    def __init__(self, exercise: Any, hidden: Any) -> None:
        self.exercise = exercise
        self.hidden = hidden
        self.right = {output.name: True for output in exercise.outputs}
        self.trials_run = 0
        self.first: tuple[Any, Any, Any, Any] | None = (
            None  # (trial, message or where, problems, exception) of the first failing trial
        )
        self.later_crash: str | None = None
        self.worst = 0.0
        self.key = None  # what drew the trials (kept in the result, for the picture)

    def crashed(self, message: str, trial: Any, exception: Any) -> None:
        """The function raised or returned something unusable: no output is right."""
        self.trials_run = trial + 1
        for name in self.right:
            self.right[name] = False
        if self.first is None:
            self.first = (trial, message, [], exception)
        else:
            self.later_crash = message

    def trial_done(self, trial: Any, where: str, problems: Any, error: Any) -> None:
        self.trials_run = trial + 1
        for problem in problems:
            self.right[problem.output] = False
        if problems and self.first is None:
            # The message is written at the end, when it is known which outputs stayed right
            # on *every* trial: the headline must say what the score table says.
            self.first = (trial, where, problems, None)
        if not problems:
            self.worst = max(self.worst, error)

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
        score = sum(output.points for output in exercise.outputs if self.right[output.name])
        if self.first is None:
            inputs = f"{'hidden ' if self.hidden else ''}random input{'s' if trials_run > 1 else ''}"
            message = f"✓ {name}: correct on {trials_run} {inputs} (max |yours − tape| = {self.worst:.1e})."
            steps = _steps(exercise, self.right, crashed=False)[0] if exercise.stepped else ()
            return CheckResult(name, True, message, trials_run, max_abs_error=self.worst, status="right",
                               outputs=dict(self.right), score=score, max_score=exercise.max_score,
                               hidden=self.hidden, steps=steps, trial_key=self.key)  # fmt: skip
        trial, message, problems, exception = self.first
        right = [output.name for output in exercise.outputs if self.right[output.name]]
        steps, first_wrong, not_blamed = (), None, ()
        if exercise.stepped:
            # After a crash no step has a verdict of its own (a crash takes every step's points).
            crashed = not problems or self.later_crash is not None
            steps, first_wrong, not_blamed = _steps(exercise, self.right, crashed=crashed)
        if problems and exercise.stepped:
            message = _stepped_message(name, message, problems, right, first_wrong, not_blamed, exercise)
        elif problems:
            message = _failure_message(name, message, problems, right)
        if self.later_crash:
            # The crash of a later trial keeps the line naming where in the student's file it raised.
            crash = self.later_crash.lstrip("✗ ").split("\n")
            place = [line.strip() for line in crash[2:] if line.lstrip().startswith("at line")]
            message += "\n  and later: " + " ".join(crash[:2] + place[:1])
        status = "partly right" if right else "wrong"
        message += "\n  " + _score_line(exercise, self.right, score, trials_run)
        mistakes = tuple(dict.fromkeys(d.name for p in problems for d in p.diagnoses))
        return CheckResult(name, False, message, trials_run, trial, problems, mistakes, exception, status=status,
                           outputs=dict(self.right), score=score, max_score=exercise.max_score,
                           hidden=self.hidden, steps=steps, first_wrong=first_wrong,
                           computed_from_wrong=not_blamed, trial_key=self.key)  # fmt: skip


def _steps(exercise: Any, right: Any, crashed: Any) -> Any:
    """``(StepResults in derivation order, the first wrong step, the wrong steps computed from a wrong one)``.

    A wrong step is *computed from wrong* when any step it is computed from,
    directly or not, is wrong: its error may be inherited, so it is not
    blamed. The first wrong step is the first, in derivation order, whose own
    sources were all right: where the derivation broke. When the function
    crashed no step has a verdict of its own: none is named first.
    """
    steps, first, not_blamed = [], None, []
    for output in exercise.outputs:
        sources = exercise.depends_on(output.name)
        if right[output.name]:
            state = "right"
        elif crashed:
            state = "wrong"
        elif any(not right[source] for source in sources):
            state = "computed from wrong"
            not_blamed.append(output.name)
        elif first is None:
            state, first = "first wrong", output.name
        else:
            state = "wrong"
        points = output.points if right[output.name] else 0
        steps.append(StepResult(output.name, right[output.name], points, output.points, output.after, state,
                                output.node))  # fmt: skip
    return tuple(steps), first, tuple(not_blamed)


def _stepped_message(
    name: str, where: str, problems: Any, right: Any, first_wrong: Any, not_blamed: Any, exercise: Any
) -> Any:
    """A stepped exercise's feedback: the first wrong step, the others wrong on their own, those not blamed."""
    own = [problem for problem in problems if problem.output not in not_blamed] or problems
    wrong = [problem.output for problem in own]
    lead = first_wrong or wrong[0]
    headline = f"✗ {name}: {lead} is the first wrong step"
    others = [step for step in wrong if step != lead]
    if others:
        headline += f" ({_join(others)} {'is' if len(others) == 1 else 'are'} wrong too)"
    if right:
        headline += f"; {_join(right)} {'is' if len(right) == 1 else 'are'} right"
    lines = [headline + ".", f"  {where}"]
    lines += [f"  {problem.text}" for problem in own]
    # The later steps computed from a wrong one, grouped by the blamed wrong steps they come from.
    groups: dict[Any, Any] = {}
    for step in not_blamed:
        sources = tuple(s for s in exercise.depends_on(step) if s not in right and s not in not_blamed)
        groups.setdefault(sources, []).append(step)
    for sources, steps in groups.items():
        verb, pronoun = ("is", "it is") if len(steps) == 1 else ("are", "they are")
        which = "which is" if len(sources) == 1 else "which are"
        lines.append(f"  {_join(steps)} {verb} computed from {_join(sources)}, {which} wrong: fix "
                     f"{_join(sources)} first ({pronoun} not counted as mistakes of their own).")  # fmt: skip
    shown: dict[Any, Any] = {}
    for problem in own:
        for diagnosis in problem.diagnoses:
            shown.setdefault(diagnosis.hint, (diagnosis, []))[1].append(problem.output)
    for diagnosis, outputs in shown.values():
        lines.append(f"  hint — {diagnosis.label} (at {', '.join(outputs)}): {diagnosis.hint}")
    if not shown:
        lines.append(f"  (no known mistake matches: go through the link into {first_wrong or wrong[0]} again)")
    return "\n".join(lines)


def _score_line(exercise: Any, right: Any, score: Any, trials_run: Any) -> Any:
    names = [output.name for output in exercise.outputs]
    good = [n for n in names if right[n]]
    bad = [n for n in names if not right[n]]
    line = f"score {score} of {exercise.max_score}"
    if good and bad:
        line += f": {_join(good)} right on all {trials_run} trials; {_join(bad)} not yet."
    elif bad:
        line += "."
    return line


def _failure_message(name: str, where: str, problems: Any, right: Any) -> Any:
    wrong = [problem.output for problem in problems]
    headline = f"✗ {name}: {_join(wrong)} {'is' if len(wrong) == 1 else 'are'} wrong"
    if right:
        headline += f"; {_join(right)} {'is' if len(right) == 1 else 'are'} right"
    lines = [headline + ".", f"  {where}"]
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


def _join(names: Any) -> Any:
    names = list(names)
    if len(names) == 1:
        return names[0]
    return ", ".join(names[:-1]) + " and " + names[-1]
