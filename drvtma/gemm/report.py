"""`explain(config, problem=None)`: a GEMM or convolution configuration judged rule by rule, each rule of
`drvtma.gemm.rules` listed as holding, broken (with its fix) or skipped (after the rule that makes it meaningless);
what `drvtma check gemm` and `drvtma check conv` print. No GPU.

    report = explain(GemmConfig(stages=5), (4096, 4096, 4096))
    report.ok, [e.rule for e in report.broken]        # False, ['smem_capacity']
    print(report)
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, cast

from ..errors import GemmError, RuleOutcome, as_int, rule_outcomes
from .config import GemmConfig
from .rules import CONV_RULES, GATES, GEMM_RULES, IN_DTYPES, MAX_ACC_REGS, PROBLEM_RULES, SMEM_LIMIT

if TYPE_CHECKING:
    from .conv import ConvShape

@dataclass(frozen=True)
class GemmReport:
    """`outcomes`: (table, outcome) per rule of the tables that apply: "configuration" (GEMM_RULES), "convolution"
    (CONV_RULES), "problem" (PROBLEM_RULES on the GEMM's, or the convolution's implicit GEMM's, M, N, K)."""

    config: GemmConfig
    problem: tuple[int, int, int] | None
    conv: ConvShape | None
    outcomes: tuple[tuple[str, RuleOutcome], ...]

    @property
    def broken(self) -> list[GemmError]:
        """Every broken rule's GemmError, in table order."""
        return [cast(GemmError, e) for _, o in self.outcomes for e in o.errors]

    @property
    def ok(self) -> bool:
        return not self.broken

    def lines(self) -> list[str]:
        out = describe(self.config, self.problem, self.conv, gates_hold=self.gates_hold())
        table, skipped = None, []  # a run of rules skipped after the same break: one line
        for i, (name, outcome) in enumerate(self.outcomes):
            if name != table:
                out.append(f"{name} rules:")
                table = name
            names = ", ".join(outcome.rule.rules)
            if outcome.skipped_after:
                skipped.append(names)
                later = self.outcomes[i + 1] if i + 1 < len(self.outcomes) else None
                if later is None or later[0] != name or later[1].skipped_after != outcome.skipped_after:
                    out.append(f"  skipped  {', '.join(skipped)} (after {', '.join(outcome.skipped_after)} broke)")
                    skipped = []
            elif outcome.errors:
                out += [f"  BROKEN   {e}" for e in outcome.errors]
            else:
                out.append(f"  ok       {names}")
        if self.ok:
            out.append(f"valid: every rule holds ({len(self.outcomes)} rules)")
        else:
            out.append(f"{len(self.broken_names)} rule(s) broken: {', '.join(self.broken_names)}")
        return out

    @property
    def broken_names(self) -> list[str]:
        """The broken rules' names, each once, in table order."""
        return list(dict.fromkeys(e.rule for e in self.broken))

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def gates_hold(self) -> bool:
        """No configuration rule broke that the derived sizes read (`rules.GATES`)."""
        return not any(name == "configuration" and o.errors and GATES & set(o.rule.rules) for name, o in self.outcomes)


def explain(config: GemmConfig, problem=None) -> GemmReport:
    """`config` against every GEMM rule; `problem`: None, the GEMM's (m, n, k), or a `ConvShape` (its rules and its
    implicit GEMM's problem rules too). Raises GemmError only for what is no configuration or shape at all (a
    non-GemmConfig, an extent that is no integer)."""
    if not isinstance(config, GemmConfig):
        raise GemmError("type", "config", type(config).__name__, "give a GemmConfig(...)")
    conv = None
    # a ConvShape is known by its gemm_mnk: importing conv (and its oracles) here would cost every `import drvtma.gemm`
    if problem is not None and not isinstance(problem, (tuple, list)):
        if not hasattr(problem, "gemm_mnk"):
            raise GemmError("type", "problem", type(problem).__name__, "give (m, n, k) or a ConvShape")
        conv, problem = problem, problem.gemm_mnk
    if problem is not None:
        if len(problem) != 3:
            raise GemmError("type", "problem", problem, "give (m, n, k) or a ConvShape")
        problem = tuple(as_int(v, name, error=GemmError, rule="shape_range") for name, v in zip("mnk", problem))
    outcomes = [("configuration", o) for o in rule_outcomes(GEMM_RULES, config)]
    if conv is not None:
        outcomes += [("convolution", o) for o in rule_outcomes(CONV_RULES, conv, config)]
    if problem is not None:
        before = [e for _, o in outcomes for e in o.errors]  # the problem rules' `after` name some of them
        outcomes += [("problem", o) for o in rule_outcomes(PROBLEM_RULES, config, *problem, before=before)]
    return GemmReport(config, cast("tuple[int, int, int] | None", problem), conv, tuple(outcomes))


def describe(config: GemmConfig, problem=None, conv=None, *, gates_hold: bool = True) -> list[str]:
    """The configuration (its label, or its fields when the dtype is unknown), its sizes when the rules they read
    hold, and the problem."""
    if config.dtype in IN_DTYPES:
        out = [f"GEMM configuration: {config.label()}"]
    else:
        changed = [f"{f.name}={getattr(config, f.name)!r}" for f in fields(config)
                   if getattr(config, f.name) != f.default]
        out = [f"GEMM configuration: GemmConfig({', '.join(changed)})"]
    if gates_hold:
        acc = config.m_atoms * config.bn // 2
        wgs = "warpgroup" if config.consumers == 1 else "warpgroups"
        out.append(f"  {config.threads} threads ({config.consumers} consumer {wgs}), {config.smem_bytes} B of "
                   f"dynamic shared memory of {SMEM_LIMIT} ({config.stages} stages of {config.stage_bytes} B), "
                   f"{acc} accumulator floats per consumer thread of {MAX_ACC_REGS}")
    if conv is not None:
        out.append(f"convolution: {conv.describe()}")
    if problem is not None:
        m, n, k = problem
        what = "implicit GEMM" if conv is not None else "problem"
        tiles = f", {config.tiles(m, n)} tiles of {config.bm} x {config.bn}" if gates_hold and min(m, n) > 0 else ""
        out.append(f"{what}: C [{m}, {n}] = A [{m}, {k}] . B [{n}, {k}]^T{tiles}")
    return out
