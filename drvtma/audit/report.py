"""The audit's report: JSON (every map, launch and count, for scripts) and Markdown (for people), grouped by library
and kernel, with one SVG per tiled map of its box's shared-memory image (`--pictures`, drawn by drvtma.show). The
figure lines gpu-check collects: one per library."""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

from ..runtime.figures import table_text
from ..tma.tiled.spec import TensorMapSpec
from .events import Counts
from .judge import Judgement, MapVerdict, parameter_at

MAX_PICTURE_CELLS = 64 * 1024  # a larger box is drawn only as text in the report (an SVG of it would not be read)


def _spec_text(v: MapVerdict) -> str:
    return v.spec.describe() if v.spec is not None else f"(does not decode: {v.error})"


def library_rows(j: Judgement, counts: Counts) -> list[dict]:
    """Per library: encode calls, distinct maps found in launches (by value, or behind a pointer with
    --follow-pointers), maps decoded, maps breaking a rule, maps whose decoded spec agrees with their encode call,
    launches, and launches whose arguments could not be read."""
    libraries = sorted({e.library for e in j.encodes} | {launch.library for launch in j.launches})
    rows = []
    for lib in libraries:
        mine = [m for m in j.maps.values() if lib in m.libraries]
        rows.append({
            "library": lib,
            "encodes": sum(e.library == lib for e in j.encodes),
            "launch_maps": sum(any(u.launch.library == lib for u in m.launches) for m in mine),
            "maps_behind_pointers": sum(any(u.launch.library == lib and u.via == "pointer" for u in m.launches)
                                        for m in mine),
            "decoded": sum(m.spec is not None for m in mine),
            "agree": sum(bool(m.agrees) for m in mine if m.encodes and m.spec is not None),
            "rules_broken": sum(bool(m.broken) for m in mine),
            "launches": sum(x.count for x in j.launches if x.library == lib),
            "unreadable": sum(x.count for x in j.launches if x.library == lib and x.arguments is None),
        })
    return rows


def figure_lines(j: Judgement, counts: Counts) -> list[dict]:
    return [{"test": "audit", **{k: r[k] for k in ("library", "encodes", "launch_maps", "decoded", "rules_broken",
                                                   "agree")}} for r in library_rows(j, counts)]


def map_json(v: MapVerdict, index: int) -> dict:
    spec = v.spec
    return {
        "map": index, "bytes": v.raw.hex(), "mode": None if spec is None else
        ("tiled" if isinstance(spec, TensorMapSpec) else "im2col"),
        "spec": None if spec is None else spec.describe(), "address": v.address, "error": v.error,
        "driver_written": v.driver_written, "agrees_with_encode": v.agrees,
        "rules_broken": [{"rule": e.rule, "message": str(e)} for e in v.broken],
        "findings": [str(f) for f in v.findings], "hazards": v.hazards, "hints": v.hints,
        "libraries": v.libraries,
        "encoded_by": [{"api": e.api, "library": e.library, "caller": e.caller, "seq": e.seq} for e in v.encodes],
        "replaced_by": [{"address": e.address, "library": e.library, "caller": e.caller} for e in v.replaces],
        "launched_by": [{"kernel": u.launch.kernel, "library": u.launch.library, "grid": list(u.launch.grid),
                         "block": list(u.launch.block), "launches": u.launch.count, "offset": u.offset,
                         "parameter": u.parameter, "caller": u.launch.caller, "via": u.via,
                         **({"pointer": u.pointer, "delta": u.delta} if u.via == "pointer" else {})}
                        for u in v.launches],
    }


def report_json(j: Judgement, counts: Counts, program: str) -> dict:
    maps = list(j.maps.values())
    return {
        "program": program,
        "libraries": library_rows(j, counts),
        "maps": [map_json(v, i + 1) for i, v in enumerate(maps)],
        "never_launched": [maps.index(v) + 1 for v in j.never_launched()],
        "not_encoded": [maps.index(v) + 1 for v in j.not_encoded()],
        "launches": [{"kernel": x.kernel, "library": x.library, "api": x.api, "grid": list(x.grid),
                      "block": list(x.block), "shared_bytes": x.shared_bytes, "launches": x.count,
                      "argument_bytes": None if x.arguments is None else len(x.arguments),
                      "packed": x.layout is None and x.arguments is not None, "unreadable": x.unreadable,
                      "maps": sum(any(u.launch is x for u in v.launches) for v in maps),
                      "pointers_followed": x.behind is not None, "behind_note": x.behind_note,
                      "tma_instructions": counts.kernel_tma.get(x.kernel),
                      "near_maps": [{"offset": o, "parameter": parameter_at(x.layout, o), "why": why}
                                    for o, why in j.near_maps.get(i, [])]} for i, x in enumerate(j.launches)],
        "unreadable_launches": counts.unreadable_launches,
        "runtime_launches": counts.runtime_launches,
        "capture_errors": counts.errors,
    }


def _near_cell(windows: list[tuple[int, str]]) -> str:
    if not windows:
        return "none"
    cell = "; ".join(f"@{o}: {why.replace('a map the driver would write but for ', '')}" for o, why in windows[:3])
    return cell + (f"; and {len(windows) - 3} more" if len(windows) > 3 else "")


def markdown(j: Judgement, counts: Counts, program: str, pictures: dict | None = None) -> str:
    maps = list(j.maps.values())
    out = [f"# drvtma audit: `{program}`", "",
           f"{len(maps)} distinct tensor map(s): {sum(bool(v.encodes) for v in maps)} encoded, "
           f"{sum(bool(v.launches) for v in maps)} found in launches; {sum(bool(v.broken) for v in maps)} break a "
           f"rule. {len(j.launches)} distinct launch(es) of {sum(x.count for x in j.launches)}.", ""]
    rows = library_rows(j, counts)
    if rows:
        out += ["## By library", "", table_text(list(rows[0]), [[str(x) for x in r.values()] for r in rows]), ""]
    for lib in sorted({lib for v in maps for lib in v.libraries}):
        out += [f"## {lib}", ""]
        for i, v in enumerate(maps):
            if lib in v.libraries:
                out += _map_lines(i + 1, v, (pictures or {}).get(i + 1))
    unread = [x for x in j.launches if x.arguments is None]
    if unread:
        out += ["## Launches whose arguments could not be read", "",
                table_text(["library", "kernel", "launches", "why"],
                           [[x.library, x.kernel[:80], str(x.count), x.unreadable] for x in unread]), ""]
    empty = [(i, x) for i, x in enumerate(j.launches) if x.arguments is not None and not any(  # all read: the cast
        u.launch is x for v in maps for u in v.launches)]
    if empty:
        out += ["## Launches with no map in their arguments", "",
                "TMA in the kernel's SASS (from the cubin seen loading): a kernel that issues tensor copies with no "
                "map in its arguments builds or keeps its maps where the audit cannot read them; UTMACCTL.IV is "
                "the fence of a map edited in global memory. Map-like windows: a map the driver would write but "
                "for a null address or a few bits it leaves clear, at that byte offset.", "",
                table_text(["library", "kernel", "launches", "argument bytes", "passed as", "TMA in its SASS",
                            "map-like windows"],
                           [[x.library, x.kernel[:80], str(x.count), str(len(cast(bytes, x.arguments))),
                             "packed buffer" if x.layout is None else "kernelParams",
                             _tma_cell(counts.kernel_tma.get(x.kernel)), _near_cell(j.near_maps.get(i, []))]
                            for i, x in empty]), ""]
    for title, chosen in (("Maps encoded but never launched", j.never_launched()),
                          ("Maps launched that no encode seen wrote (edited, or built elsewhere)", j.not_encoded())):
        if chosen:
            out += [f"## {title}", "", ", ".join(f"map {maps.index(v) + 1}" for v in chosen), ""]
    if counts.runtime_launches:
        out += [f"Launches through the runtime API: {counts.runtime_launches}.", ""]
    if counts.errors:
        out += ["## The capture's own errors", "", *[f"- {e}" for e in counts.errors[:20]], ""]
    return "\n".join(out)


def _tma_cell(instructions) -> str:
    if instructions is None:
        return "no cubin seen"
    if isinstance(instructions, str):
        return instructions
    return ", ".join(instructions) or "none"


def _map_lines(index: int, v: MapVerdict, picture: str | None) -> list[str]:
    out = [f"### map {index}", "", "```", _spec_text(v), "```", "",
           f"- global address 0x{v.address:x}; " + ("exactly as the driver writes it" if v.driver_written else
                                                    "not byte-for-byte what the driver writes for this spec")]
    if v.agrees is not None:
        out.append("- decoded spec " + ("agrees with" if v.agrees else "DIFFERS from") + " the encode call's "
                   "arguments")
    for e in v.encodes[:5]:
        out.append(f"- encoded by {e.api} ({e.library}) at {e.caller or 'no Python frame'}")
    if len(v.encodes) > 5:
        out.append(f"- ... and {len(v.encodes) - 5} more encode call(s)")
    for u in v.launches[:10]:
        where = f"parameter {u.parameter}" if u.parameter is not None else f"byte {u.offset} of a packed buffer"
        if u.via == "pointer":
            where = f"in global memory {u.delta} B past the pointer 0x{u.pointer:x} of {where}"
        out.append(f"- launched by `{u.launch.kernel[:100]}` ({u.launch.library}), grid {u.launch.grid}, "
                   f"{u.launch.count} time(s), {where}")
    out += [f"- rule broken: {e}" for e in v.broken]
    out += [f"- hazard: {h}" for h in v.hazards] + [f"- hint: {h}" for h in v.hints]
    out += [f"- finding: {f}" for f in v.findings]
    if picture:
        out.append(f"- picture: [{picture}]({picture})")
    return out + [""]


def draw_pictures(j: Judgement, directory: Path) -> dict[int, str]:
    """map index -> SVG file name, for each tiled map that decodes, breaks no rule and has a drawable box."""
    from .. import show  # late: only --pictures draws, so `drvtma audit` without it never loads show and wgmma

    out = {}
    for i, v in enumerate(j.maps.values()):
        spec = v.spec
        if not isinstance(spec, TensorMapSpec) or v.broken:
            continue
        cells = 1
        for b in spec.box:
            cells *= b
        if cells > MAX_PICTURE_CELLS:
            continue
        name = f"map{i + 1}.svg"
        (directory / name).write_text(show.svg_text(show.build(show.draw_image(spec))))
        out[i + 1] = name
    return out


def write_report(directory, j: Judgement, counts: Counts, program: str, *, pictures: bool = False) -> list[Path]:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    drawn = draw_pictures(j, directory) if pictures else {}
    json_path, md_path = directory / "audit.json", directory / "audit.md"
    json_path.write_text(json.dumps(report_json(j, counts, program), indent=1) + "\n")
    md_path.write_text(markdown(j, counts, program, drawn) + "\n")
    return [json_path, md_path, *(directory / n for n in drawn.values())]
