"""The verdict over all trials: which outputs stayed right, the first failure, and the feedback text."""

from .result import CheckResult

__all__ = ["Verdict"]


class Verdict:
    """Collects the trials: which outputs stayed right, and the first failure to explain."""

    def __init__(self, exercise, hidden):
        self.exercise = exercise
        self.hidden = hidden
        self.right = {output.name: True for output in exercise.outputs}
        self.trials_run = 0
        self.first = None  # (trial, message or where, problems, exception) of the first failing trial
        self.later_crash = None
        self.worst = 0.0

    def crashed(self, message, trial, exception):
        """The function raised or returned something unusable: no output is right."""
        self.trials_run = trial + 1
        for name in self.right:
            self.right[name] = False
        if self.first is None:
            self.first = (trial, message, [], exception)
        else:
            self.later_crash = message

    def trial_done(self, trial, where, problems, error):
        self.trials_run = trial + 1
        for problem in problems:
            self.right[problem.output] = False
        if problems and self.first is None:
            # The message is written at the end, when it is known which outputs stayed right
            # on *every* trial: the headline must say what the score table says.
            self.first = (trial, where, problems, None)
        if not problems:
            self.worst = max(self.worst, error)

    def finish(self, message=None, trials_run=None, trial=None, *, exception=None, status=None):
        exercise = self.exercise
        name = exercise.name
        trials_run = self.trials_run if trials_run is None else trials_run
        if status is not None:  # not started / not checked: no output earns its points
            outputs = {output.name: False for output in exercise.outputs}
            return CheckResult(name, False, message, trials_run, trial, exception=exception, status=status,
                               outputs=outputs, max_score=exercise.max_score, hidden=self.hidden)  # fmt: skip
        if message is not None:  # the function could not even be called
            outputs = {output.name: False for output in exercise.outputs}
            return CheckResult(name, False, message, trials_run, outputs=outputs,
                               max_score=exercise.max_score, hidden=self.hidden)  # fmt: skip
        score = sum(output.points for output in exercise.outputs if self.right[output.name])
        if self.first is None:
            inputs = f"{'hidden ' if self.hidden else ''}random input{'s' if trials_run > 1 else ''}"
            message = f"✓ {name}: correct on {trials_run} {inputs} (max |yours − tape| = {self.worst:.1e})."
            return CheckResult(name, True, message, trials_run, max_abs_error=self.worst, status="right",
                               outputs=dict(self.right), score=score, max_score=exercise.max_score,
                               hidden=self.hidden)  # fmt: skip
        trial, message, problems, exception = self.first
        right = [output.name for output in exercise.outputs if self.right[output.name]]
        if problems:
            message = _failure_message(name, message, problems, right)
        if self.later_crash:
            message += "\n  and later: " + " ".join(self.later_crash.lstrip("✗ ").split("\n")[:2])
        status = "partly right" if right else "wrong"
        message += "\n  " + _score_line(exercise, self.right, score, trials_run)
        mistakes = tuple(dict.fromkeys(d.name for p in problems for d in p.diagnoses))
        return CheckResult(name, False, message, trials_run, trial, problems, mistakes, exception, status=status,
                           outputs=dict(self.right), score=score, max_score=exercise.max_score,
                           hidden=self.hidden)  # fmt: skip


def _score_line(exercise, right, score, trials_run):
    names = [output.name for output in exercise.outputs]
    good = [n for n in names if right[n]]
    bad = [n for n in names if not right[n]]
    line = f"score {score} of {exercise.max_score}"
    if good and bad:
        line += f": {_join(good)} right on all {trials_run} trials; {_join(bad)} not yet."
    elif bad:
        line += "."
    return line


def _failure_message(name, where, problems, right):
    wrong = [problem.output for problem in problems]
    headline = f"✗ {name}: {_join(wrong)} {'is' if len(wrong) == 1 else 'are'} wrong"
    if right:
        headline += f"; {_join(right)} {'is' if len(right) == 1 else 'are'} right"
    lines = [headline + ".", f"  {where}"]
    for problem in problems:
        lines.append(f"  {problem.text}")
    shown = {}
    for problem in problems:
        for diagnosis in problem.diagnoses:
            shown.setdefault(diagnosis.hint, (diagnosis, []))[1].append(problem.output)
    for diagnosis, outputs in shown.values():
        lines.append(f"  hint — {diagnosis.label} ({', '.join(outputs)}): {diagnosis.hint}")
    if not shown:
        lines.append("  (no known mistake matches: go through the chain in the prompt one link at a time)")
    return "\n".join(lines)


def _join(names):
    names = list(names)
    if len(names) == 1:
        return names[0]
    return ", ".join(names[:-1]) + " and " + names[-1]
