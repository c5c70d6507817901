"""Wrong inputs to every `drvtma` command (see bad_inputs.py for what each case asserts).

Every case ends the same way on a CPU-only machine and on an H200: usage errors are found before anything touches
the GPU, and the rule cases (exit 1) are checked on the CPU (check, decode, wgmma, a fuzz --spec)."""

from __future__ import annotations

from bad_inputs import CliCase


def _map_hex(box_inner: int | None = None) -> str:
    """A float32 map's 128 bytes as hex; `box_inner` overwrites its inner box dimension (3 floats: a rule broken)."""
    import drvtma.tma.decode as D
    from drvtma.tma.spec import TensorMapSpec

    raw = D.encode_bytes(TensorMapSpec.create("float32", (64, 64), (16, 32), base_address=1 << 20))
    if box_inner is not None:
        raw = D.put(int.from_bytes(raw, "little"), D.BOX_DIM[0], box_inner - 1).to_bytes(128, "little")
    return raw.hex()


GOOD = _map_hex()
BROKEN = _map_hex(box_inner=3)


def _im2col_extra_bit_hex() -> str:
    """An im2col map's bytes with bit 500 set: no field of an im2col map holds it."""
    import drvtma.tma.decode as D
    from drvtma.tma.im2col_decode import encode_im2col_bytes
    from drvtma.tma.im2col_spec import Im2colSpec

    raw = encode_im2col_bytes(Im2colSpec.create("f16", (2, 8, 8, 16), (-1, -1), (-1, -1), 16, 32, base_address=1 << 20))
    return D.put(int.from_bytes(raw, "little"), (500, 1), 1).to_bytes(128, "little").hex()


IM2COL_EXTRA_BIT = _im2col_extra_bit_hex()


def _lit(text: str) -> str:
    """JSON text as an argv item (argv items are format strings: braces doubled)."""
    return text.replace("{", "{{").replace("}", "}}")


def _spec(extra: str) -> str:
    return _lit('{"dtype": "f32", "shape": [64], "box": [16]%s}' % extra)

FAKE = ("--fake-device", "--no-db", "--quiet", "--out", "{tmp}/fuzz")


def _cases(command: tuple[str, ...], rows) -> list[CliCase]:
    """CliCases for one command: rows of (id, extra argv, names[, status[, one_line]])."""
    out = []
    for row in rows:
        id_, argv, names, *rest = row
        out.append(CliCase("-".join(["cli", *command, id_]), (*command, *argv), names, *rest))
    return out


CASES: list[CliCase] = [
    *_cases((), [
        ("no-command", (), ("command",)),
        ("unknown-command", ("nonesuch",), ("nonesuch", "commands")),
        ("option-as-command", ("--version",), ("--version",)),
    ]),
    *_cases(("info",), [
        ("extra-argument", ("extra",), ("unrecognized", "extra")),
        ("unknown-option", ("--bogus",), ("--bogus",)),
        ("target-no-arch", ("--target", "sm_7"), ("--target", "sm_7")),
        ("target-and-table", ("--target", "sm_90a", "--table"), ("--table",)),
    ]),
    *_cases(("compile",), [
        ("missing-file", ("{missing}",), ("source", "no-such-file")),
        ("missing-kernel-name", ("nonesuch.cu",), ("source", "nonesuch.cu")),
        ("folder", ("{tmp}",), ("source",)),
        ("no-source", (), ("source",)),
        ("syntax-error", ("{syntax_cu}",), ("syntax_cu.cu", "compile failed"), 1, False),
        ("json-as-cuda", ("{list_json}",), ("list_json.json", "compile failed"), 1, False),
        ("define-empty-name", ("-D", "=3", "{syntax_cu}"), ("-D", "=3")),
        ("define-not-identifier", ("-D", "1X=2", "{syntax_cu}"), ("-D", "1X=2")),
        ("define-no-value", ("{syntax_cu}", "-D"), ("-D",)),
        ("unknown-option", ("--arch", "sm_80", "{syntax_cu}"), ("--arch",)),
        ("include-dir-missing", ("-I", "{missing}", "{syntax_cu}"), ("-I", "no-such-file")),
        ("inspect-source", ("--inspect", "{syntax_cu}"), ("source", "cubin")),
        ("inspect-missing", ("--inspect", "{missing}"), ("source", "no-such-file")),
        ("inspect-with-define", ("--inspect", "-D", "X=1", "{syntax_cu}"), ("--inspect", "-D")),
    ]),
    *_cases(("decode",), [
        ("not-hex", ("xyz",), ("hex",)),
        ("not-hex-full-length", ("g" * 256,), ("hex", "'g'")),
        ("odd-digits", ("abc",), ("hex", "3 hex digits", "256")),
        ("too-few-digits", ("00" * 127,), ("hex", "254", "256")),
        ("too-many-digits", ("00" * 129,), ("hex", "258", "256")),
        ("empty", ("",), ("hex", "0 hex digits")),
        ("two-halves-pasted", ("0x" + GOOD[:128], "0x" + GOOD[128:]), ("hex", "0x")),
        ("two-halves-one-word", ("0x" + GOOD[:128] + "0x" + GOOD[128:],), ("hex", "0x")),
        ("no-argument", (), ("hex",)),
        ("unknown-option", (GOOD, "--yaml"), ("--yaml",)),
        ("all-ones", ("ff" * 128,), ("bits",)),
        ("broken-rule", (BROKEN,), ("rule", "box_inner_bytes"), 1),
        ("file-wrong-size", ("{list_json}",), ("list_json.json", "128")),
        ("im2col-unknown-bit", (IM2COL_EXTRA_BIT,), ("bits", "im2col")),
    ]),
    *_cases(("check",), [
        ("no-spec", (), ("dtype",)),
        ("map-with-spec-flags", ("--map", GOOD, "--dtype", "f32"), ("--map", "--dtype")),
        ("map-not-hex", ("--map", "xyz"), ("--map", "hex")),
        ("map-broken-rule", ("--map", BROKEN), ("rule", "box_inner_bytes"), 1),
        ("no-box", ("--dtype", "f32", "--shape", "4,250"), ("box",)),
        ("no-shape", ("--dtype", "f32", "--box", "2,32"), ("shape",)),
        ("json-list", ("--json", "[1,2,3]"), ("--json", "list")),
        ("json-number", ("--json", "42"), ("--json", "int")),
        ("json-text-invalid", ("--json", _lit("{not json")), ("--json", "not valid JSON")),
        ("json-file-invalid", ("--json", "{bad_json}"), ("--json", "not valid JSON")),
        ("json-file-list", ("--json", "{list_json}"), ("--json", "list")),
        ("json-file-number", ("--json", "{number_json}"), ("--json", "int")),
        ("json-file-empty", ("--json", "{empty_file}"), ("--json", "not valid JSON")),
        ("json-file-missing", ("--json", "{missing}"), ("--json", "neither a file")),
        ("json-no-box", ("--json", "{spec_no_box_json}"), ("box",)),
        ("json-base-address-text", ("--json", _spec(', "base_address": "xyz"')), ("base_address", "xyz")),
        ("json-base-address-negative", ("--json", _spec(', "base_address": -16')), ("base_address", "-16")),
        ("json-base-address-float", ("--json", _spec(', "base_address": 1.5')), ("base_address", "1.5")),
        ("json-base-address-list", ("--json", _spec(', "base_address": [16]')), ("base_address",)),
        ("json-unknown-field", ("--json", _spec(', "bogus": 1')), ("bogus",)),
        ("json-shape-text", ("--json", _lit('{"dtype": "f32", "shape": "abc", "box": [16]}')), ("shape",)),
        ("json-shape-float", ("--json", _lit('{"dtype": "f32", "shape": [4.5], "box": [16]}')), ("shape", "4.5")),
        ("json-box-bool", ("--json", _lit('{"dtype": "f32", "shape": [64], "box": [true]}')), ("box",)),
        ("json-dtype-null", ("--json", _lit('{"dtype": null, "shape": [64], "box": [16]}')), ("dtype",)),
        ("json-dtype-unknown", ("--json", _lit('{"dtype": "complex128", "shape": [64], "box": [16]}')), ("dtype",)),
        ("json-dtype-blackwell", ("--json", _lit('{"dtype": 13, "shape": [64], "box": [16]}')),
         ("needs_subbyte_maps",), 1),
        ("json-swizzle-unknown", ("--json", _spec(', "swizzle": "96B"')), ("swizzle", "96B")),
        ("json-swizzle-list", ("--json", _spec(', "swizzle": [1]')), ("swizzle",)),
        ("json-strides-twice", ("--json", _spec(', "strides": [1], "strides_bytes": [4]')), ("strides",)),
        ("dtype-unknown", ("--dtype", "nonesuch", "--shape", "64", "--box", "16"), ("--dtype", "nonesuch")),
        ("dtype-sub-byte", ("--dtype", "int4", "--shape", "64", "--box", "16"), ("--dtype", "int4")),
        ("dtype-missing-value", ("--dtype",), ("--dtype", "expected one argument")),
        ("shape-letters", ("--dtype", "f32", "--shape", "a,b", "--box", "2,32"), ("--shape", "a,b")),
        ("shape-empty", ("--dtype", "f32", "--shape", "", "--box", "2,32"), ("--shape",)),
        ("box-float", ("--dtype", "f32", "--shape", "4,250", "--box", "2.5,32"), ("--box", "2.5,32")),
        ("strides-letters", ("--dtype", "f32", "--shape", "4,250", "--box", "2,32", "--strides", "q"),
         ("--strides", "q")),
        ("strides-bytes-letters", ("--dtype", "f32", "--shape", "4,250", "--box", "2,32", "--strides-bytes", "1k,4"),
         ("--strides-bytes", "1k,4")),
        ("element-strides-letters", ("--dtype", "f32", "--shape", "64", "--box", "16", "--element-strides", "one"),
         ("--element-strides", "one")),
        ("swizzle-unknown", ("--dtype", "f32", "--shape", "64", "--box", "16", "--swizzle", "96B"),
         ("--swizzle", "96B", "128B")),
        ("swizzle-number", ("--dtype", "f32", "--shape", "64", "--box", "16", "--swizzle", "3"), ("--swizzle", "'3'")),
        ("interleave-unknown", ("--dtype", "f32", "--shape", "64", "--box", "16", "--interleave", "8B"),
         ("--interleave", "8B", "16B")),
        ("l2-promotion-unknown", ("--dtype", "f32", "--shape", "64", "--box", "16", "--l2-promotion", "512B"),
         ("--l2-promotion", "512B", "256B")),
        ("oob-fill-unknown", ("--dtype", "f32", "--shape", "64", "--box", "16", "--oob-fill", "purple"),
         ("--oob-fill", "purple", "nan")),
        ("address-negative", ("--dtype", "f32", "--shape", "64", "--box", "16", "--address=-16"), ("--address", "-16")),
        ("address-text", ("--dtype", "f32", "--shape", "64", "--box", "16", "--address", "xyz"), ("--address", "xyz")),
        ("address-float", ("--dtype", "f32", "--shape", "64", "--box", "16", "--address", "1.5"), ("--address", "1.5")),
        ("address-over-64-bits", ("--dtype", "f32", "--shape", "64", "--box", "16", "--address",
                                  "0x10000000000000000"), ("--address", "0x10000000000000000")),
        ("unknown-option", ("--bogus",), ("--bogus",)),
        ("rule-box-range", ("--dtype", "f32", "--shape", "4,250", "--box", "2,300"), ("rule", "box_range"), 1),
        ("rule-address-alignment", ("--dtype", "f32", "--shape", "64", "--box", "16", "--address", "0x8"),
         ("rule", "address_alignment"), 1),
        ("rule-nan-fill-integer", ("--dtype", "u8", "--shape", "64", "--box", "16", "--oob-fill", "nan"),
         ("rule", "nan_fill_type"), 1),
        ("rule-swizzle-span", ("--dtype", "f32", "--shape", "64,64", "--box", "16,64", "--swizzle", "32B"),
         ("rule", "swizzle_span"), 1),
        ("rule-negative-shape", ("--dtype", "f32", "--shape=-4,250", "--box", "2,32"), ("rule", "dim_range"), 1),
        ("rule-json-file", ("--json", "{spec_broken_json}"), ("rule", "box_range"), 1),
    ]),
    *_cases(("check", "--im2col", "--dtype", "f16", "--shape", "2,8,8,16", "--lower-corner=-1,-1",
             "--upper-corner=-1,-1", "--channels-per-pixel", "16"), [
        ("im2col-no-pixels", (), ("pixels_per_column", "--pixels-per-column")),
        ("im2col-pixels-two", ("--pixels-per-column", "8,8"), ("--pixels-per-column", "one integer")),
        ("im2col-pixels-text", ("--pixels-per-column", "many"), ("--pixels-per-column", "many")),
        ("im2col-with-box", ("--pixels-per-column", "8", "--box", "4"), ("--box", "no box")),
        ("im2col-with-show", ("--pixels-per-column", "8", "--show"), ("--show", "tiled")),
        ("im2col-corner-text", ("--pixels-per-column", "8", "--lower-corner", "a,b"), ("--lower-corner", "a,b")),
        ("im2col-rule-pixels", ("--pixels-per-column", "2000"), ("rule", "pixels_range"), 1),
        ("im2col-rule-corner", ("--pixels-per-column", "8", "--lower-corner=-200,0"), ("rule", "corner_range"), 1),
        ("im2col-rule-box-empty", ("--pixels-per-column", "8", "--upper-corner=-9,0"), ("rule", "box_empty"), 1),
    ]),
    *_cases(("check",), [
        ("im2col-flag-without-im2col", ("--dtype", "f32", "--shape", "64", "--box", "16", "--pixels-per-column", "8"),
         ("--pixels-per-column", "--im2col")),
    ]),
    *_cases(("wgmma",), [
        ("tile-one-number", ("--tile", "128"), ("--tile", "128", "MNxK")),
        ("tile-letters", ("--tile", "axb"), ("--tile", "axb")),
        ("tile-three-numbers", ("--tile", "128x64x2"), ("--tile", "128x64x2")),
        ("tile-zero", ("--tile", "0x64"), ("--tile", "0x64")),
        ("tile-negative", ("--tile=-128x64",), ("--tile", "-128x64")),
        ("dtype-unknown", ("--dtype", "f64"), ("--dtype", "f64", "bf16")),
        ("operand-c", ("--operand", "C"), ("--operand", "'C'")),
        ("major-x", ("--major", "X"), ("--major", "'X'")),
        ("swizzle-unknown", ("--swizzle", "96B"), ("--swizzle", "96B")),
        ("decode-text", ("--decode", "xyz"), ("--decode", "xyz")),
        ("decode-negative", ("--decode=-1",), ("--decode", "-1")),
        ("decode-over-64-bits", ("--decode", "0x1ffffffffffffffff"), ("--decode", "0x1ffffffffffffffff")),
        ("smem-negative", ("--smem=-16",), ("--smem", "-16")),
        ("smem-text", ("--smem", "abc"), ("--smem", "abc")),
        ("unknown-option", ("--bogus",), ("--bogus",)),
        ("rule-decode-reserved-bits", ("--decode", hex(1 << 46)), ("reserved_bits",), 1),
        ("rule-tf32-mn-major", ("--dtype", "tf32", "--major", "MN"), ("major",), 1),
        ("rule-n-too-large", ("--tile", "512x64"), ("shape_n",), 1),
    ]),
    *_cases(("fuzz",), [
        ("no-target", (), ("target",)),
        ("unknown-target", ("nonesuch", *FAKE), ("target", "nonesuch")),
        ("examples-negative", ("loads", "--examples=-5", *FAKE), ("--examples", "-5")),
        ("examples-zero", ("loads", "--examples", "0", *FAKE), ("--examples", "'0'")),
        ("examples-text", ("loads", "--examples", "many", *FAKE), ("--examples", "many")),
        ("examples-float", ("loads", "--examples", "1.5", *FAKE), ("--examples", "1.5")),
        ("seconds-negative", ("loads", "--seconds=-1", *FAKE), ("--seconds", "-1")),
        ("seconds-zero", ("loads", "--seconds", "0", *FAKE), ("--seconds", "'0'")),
        ("seconds-nan", ("loads", "--seconds", "nan", *FAKE), ("--seconds", "nan")),
        ("seconds-infinite", ("loads", "--seconds", "inf", *FAKE), ("--seconds", "inf")),
        ("seconds-text", ("loads", "--seconds", "soon", *FAKE), ("--seconds", "soon")),
        ("examples-and-seconds", ("loads", "--examples", "5", "--seconds", "1", *FAKE), ("--seconds", "--examples")),
        ("seed-text", ("loads", "--seed", "lucky", *FAKE), ("--seed", "lucky")),
        ("seed-negative", ("loads", "--seed=-1", *FAKE), ("--seed", "-1")),
        ("devices-foo", ("loads", "--devices", "foo", *FAKE), ("--devices", "foo")),
        ("devices-empty", ("loads", "--devices", "", *FAKE), ("--devices",)),
        ("devices-negative", ("loads", "--devices=-1", *FAKE), ("--devices", "-1")),
        ("devices-mixed", ("loads", "--devices", "0,x", *FAKE), ("--devices", "0,x")),
        ("spec-missing", ("loads", "--spec", "{missing}", *FAKE), ("--spec", "no-such-file")),
        ("spec-folder", ("loads", "--spec", "{tmp}", *FAKE), ("--spec", "folder")),
        ("spec-invalid-json", ("loads", "--spec", "{bad_json}", *FAKE), ("--spec", "not valid JSON")),
        ("spec-empty", ("loads", "--spec", "{empty_file}", *FAKE), ("--spec", "not valid JSON")),
        ("spec-list", ("loads", "--spec", "{list_json}", *FAKE), ("--spec", "list")),
        ("spec-number", ("loads", "--spec", "{number_json}", *FAKE), ("--spec", "int")),
        ("spec-no-box", ("loads", "--spec", "{spec_no_box_json}", *FAKE), ("--spec", "box")),
        ("spec-not-a-spec", ("encode", "--spec", "{not_repro_json}", *FAKE), ("--spec", "hello")),
        ("spec-rule-broken", ("loads", "--spec", "{spec_broken_json}", *FAKE), ("box_range",), 1),
        ("out-unwritable", ("loads", "--examples", "4", "--fake-device", "--no-db", "--out", "{unwritable}"),
         ("--out", "a-file")),
        ("out-is-a-file", ("loads", "--examples", "4", "--fake-device", "--no-db", "--out", "{bad_json}"),
         ("--out", "bad_json.json", "folder")),
        ("db-unwritable", ("loads", "--examples", "4", "--fake-device", "--db", "{unwritable}", "--out", "{tmp}/f"),
         ("--db", "a-file")),
        ("db-redis-unusable", ("loads", "--examples", "4", "--fake-device", "--db", "redis://127.0.0.1:1/0", "--out",
                               "{tmp}/f"), ("--db", "redis://127.0.0.1:1/0")),
        ("max-shrinks-negative", ("loads", "--max-shrinks=-1", *FAKE), ("--max-shrinks", "-1")),
        ("kernel-missing-file", ("loads", "--kernel", "{missing}:run", *FAKE), ("--kernel", "no file")),
        ("kernel-no-name", ("loads", "--kernel", "{bad_json}", *FAKE), ("--kernel", "file.py:name")),
        ("kernel-on-encode", ("encode", "--kernel", "x.py:run", *FAKE), ("--kernel", "encode")),
        ("kernel-strategy-unknown", ("loads", "--kernel", "x.py:run", "--strategy", "cutlass", *FAKE),
         ("--strategy", "cutlass")),
        ("shrink-seconds-zero", ("loads", "--shrink-seconds", "0", *FAKE), ("--shrink-seconds", "'0'")),
        ("stores-fake-device", ("stores", "--examples", "4", *FAKE), ("--fake-device", "stores")),
        ("reductions-fake-device", ("reductions", "--examples", "4", *FAKE), ("--fake-device", "reductions")),
        ("unknown-option", ("loads", "--bogus", *FAKE), ("--bogus",)),
        ("shard-out-of-range", ("loads", "--shard", "4/4", "--seed", "1", *FAKE), ("--shard", "4/4")),
        ("shard-text", ("loads", "--shard", "half", "--seed", "1", *FAKE), ("--shard", "half")),
        ("shard-says-why", ("loads", "--shard", "3/2", "--seed", "1", *FAKE), ("--shard", "3/2", "0 <= K < N")),
        ("shard-k8s-no-count", ("loads", "--shard", "k8s/x", "--seed", "1", *FAKE), ("--shard", "k8s/x", "k8s/N")),
        ("shard-slurm-unset", ("loads", "--shard", "slurm", "--seed", "1", *FAKE), ("--shard", "SLURM_ARRAY_TASK_ID")),
        ("shard-without-seed", ("loads", "--shard", "1/2", *FAKE), ("--seed", "--shard")),
        ("shard-and-devices", ("loads", "--shard", "1/2", "--devices", "0", *FAKE), ("--shard", "--devices")),
        ("merge-nothing", ("merge",), ("DIR",)),
        ("merge-missing", ("merge", "{missing}"), ("fuzz_merge", "does not exist")),
        ("merge-no-reports", ("merge", "{tmp}"), ("fuzz_merge", "no *-report.json")),
        ("merge-report-no-size", ("merge", "{report_no_size_json}"), ("fuzz_merge", "lacks size")),
        ("merge-report-bad-shard", ("merge", "{report_bad_shard_json}"), ("fuzz_merge", "'0/1'")),
        ("merge-report-bad-row", ("merge", "{report_bad_row_json}"), ("fuzz_merge", "label")),
    ]),
    *_cases(("repro",), [
        ("no-file", (), ("file",)),
        ("missing", ("{missing}",), ("file", "no-such-file")),
        ("folder", ("{tmp}",), ("file", "folder")),
        ("invalid-json", ("{bad_json}",), ("file", "not valid JSON")),
        ("empty", ("{empty_file}",), ("file", "not valid JSON")),
        ("list", ("{list_json}",), ("file", "list")),
        ("not-a-reproducer", ("{not_repro_json}",), ("file", "not a reproducer")),
        ("spec-not-a-reproducer", ("{spec_json}",), ("file", "not a reproducer")),
        ("partial", ("{repro_partial_json}",), ("file", "lacks", "case")),
        ("unknown-target", ("{repro_unknown_target_json}",), ("file", "nonesuch")),
        ("case-does-not-load", ("{repro_bad_case_json}", "--fake-device"), ("file", "case")),
        ("unknown-option", ("{not_repro_json}", "--bogus"), ("--bogus",)),
    ]),
    *_cases(("sweep",), [
        ("n-not-tile-multiple", ("--n", "1000"), ("--n", "1000", "1024")),
        ("n-zero", ("--n", "0"), ("--n", "'0'")),
        ("n-negative", ("--n=-1024",), ("--n", "-1024")),
        ("n-text", ("--n", "lots"), ("--n", "lots")),
        ("n-too-large", ("--n", str(1 << 40)), ("--n", str(1 << 40))),
        ("threads-not-warps", ("--threads", "33"), ("threads", "33")),
        ("threads-zero", ("--threads", "0"), ("--threads", "'0'")),
        ("runs-zero", ("--runs", "0"), ("--runs", "'0'")),
        ("warmups-negative", ("--warmups=-1",), ("--warmups", "-1")),
        ("hold-us-negative", ("--hold-us=-5",), ("--hold-us", "-5")),
        ("fma-text", ("--fma", "1,two"), ("--fma", "1,two")),
        ("fma-negative", ("--fma=1,-2",), ("--fma", "1,-2")),
        ("modes-unknown", ("--modes", "sync,warp9"), ("--modes", "warp9")),
        ("modes-empty", ("--modes", ","), ("--modes",)),
        ("preset-unknown", ("--preset", "fast"), ("--preset", "fast", "article")),
        ("split-unknown", ("--split", "block"), ("--split", "block", "warp")),
        ("stages-too-many", ("--stages", "99"), ("stages", "99")),
        ("tiles-per-stage-zero", ("--tiles-per-stage", "0"), ("--tiles-per-stage", "'0'")),
        ("ring-threads-text", ("--ring-threads", "many"), ("--ring-threads", "many")),
        ("seed-text", ("--seed", "x"), ("--seed", "'x'")),
        ("flush-l2-value", ("--flush-l2=yes",), ("--flush-l2",)),
        ("out-unwritable", ("--out", "{unwritable}"), ("--out", "a-file")),
        ("csv-unwritable", ("--csv", "{unwritable}"), ("--csv", "a-file")),
        ("csv-folder", ("--csv", "{tmp}"), ("--csv", "folder")),
    ]),
    *_cases(("bench",), [
        ("no-benchmark", (), ("benchmark",)),
        ("unknown-benchmark", ("fastest",), ("fastest", "roof")),
    ]),
    *_cases(("bench", "roof"), [
        ("bytes-zero", ("--bytes", "0"), ("--bytes", "'0'")),
        ("bytes-below-a-tile", ("--bytes", "100"), ("--bytes", "100", "4096")),
        ("bytes-text", ("--bytes", "1G"), ("--bytes", "1G")),
        ("runs-zero", ("--runs", "0"), ("--runs", "'0'")),
        ("warmups-negative", ("--warmups=-2",), ("--warmups", "-2")),
        ("threads-not-warps", ("--threads", "33"), ("threads", "33")),
        ("stages-text", ("--stages", "2,x"), ("--stages", "2,x")),
        ("tiles-per-stage-zero", ("--tiles-per-stage", "0"), ("--tiles-per-stage", "'0'")),
        ("blocks-per-sm-negative", ("--blocks-per-sm=-1",), ("--blocks-per-sm", "-1")),
        ("split-unknown", ("--split", "thread,block"), ("--split", "thread,block")),
        ("out-unwritable", ("--out", "{unwritable}"), ("--out", "a-file")),
    ]),
    *_cases(("bench", "floors"), [
        ("stages-too-many", ("--stages", "99"), ("stages", "99")),
        ("n-not-tile-multiple", ("--n", "1500"), ("--n", "1500")),
        ("fma-text", ("--fma", "x"), ("--fma", "'x'")),
        ("out-unwritable", ("--out", "{unwritable}"), ("--out", "a-file")),
    ]),
    *_cases(("bench", "multicast"), [
        ("ks-three", ("--ks", "1,3"), ("--ks", "3")),
        ("ks-sixteen", ("--ks", "16"), ("--ks", "16")),
        ("ks-text", ("--ks", "two"), ("--ks", "two")),
        ("tile-kib-odd", ("--tile-kib", "3"), ("--tile-kib", "3")),
        ("tile-kib-too-large", ("--tile-kib", "200"), ("--tile-kib", "200")),
        ("stages-nine", ("--stages", "9"), ("--stages", "9")),
        ("runs-zero", ("--runs", "0"), ("--runs", "'0'")),
        ("out-unwritable", ("--out", "{unwritable}"), ("--out", "a-file")),
    ]),
    *_cases(("bench", "descriptors"), [
        ("loads-one", ("--loads", "1"), ("--loads", "1")),
        ("loads-text", ("--loads", "x"), ("--loads", "'x'")),
        ("runs-zero", ("--runs", "0"), ("--runs", "'0'")),
        ("launches-negative", ("--launches=-1",), ("--launches", "-1")),
    ]),
    *_cases(("bench", "conv"), [
        ("batch-zero", ("--batch", "0"), ("--batch", "'0'")),
        ("warmups-negative", ("--warmups=-1",), ("--warmups", "-1")),
    ]),
    *_cases(("bench", "gemm"), [
        ("dtypes-unknown", ("--dtypes", "bfloat16,int4"), ("--dtypes", "int4", "float16")),
        ("dtypes-empty", ("--dtypes", ","), ("--dtypes",)),
        ("shapes-two-numbers", ("--shapes", "4096x4096"), ("--shapes", "4096x4096")),
        ("shapes-zero", ("--shapes", "0x4096x4096"), ("--shapes", "0")),
        ("claim-shape-text", ("--claim-shape", "big"), ("--claim-shape", "big")),
        ("set-unknown-field", ("--set", "warp_speed=9"), ("--set", "warp_speed")),
        ("set-no-equals", ("--set", "stages"), ("--set", "stages")),
        ("set-int-text", ("--set", "stages=x"), ("--set", "'x'")),
        ("set-bool-text", ("--set", "persistent=maybe"), ("--set", "maybe")),
        ("stages-zero", ("--stages", "0"), ("--stages", "'0'")),
        ("swizzle-unknown", ("--swizzle", "96B"), ("--swizzle", "96B")),
        ("backend-unknown", ("--backend", "cutlass"), ("--backend", "cutlass")),
        ("runs-zero", ("--runs", "0"), ("--runs", "'0'")),
        ("warmups-negative", ("--warmups=-1",), ("--warmups", "-1")),
        ("out-unwritable", ("--out", "{unwritable}"), ("--out", "a-file")),
    ]),
    *_cases(("show",), [
        ("no-spec", (), ("dtype",)),
        ("base-offset-unaligned", ("--dtype", "u8", "--shape", "64", "--box", "64", "--base-offset", "100"),
         ("--base-offset", "100", "896")),
        ("base-offset-past-1024", ("--dtype", "u8", "--shape", "64", "--box", "64", "--base-offset", "1024"),
         ("--base-offset", "1024")),
        ("at-letters", ("--dtype", "u8", "--shape", "64", "--box", "64", "--at", "a"), ("--at", "'a'")),
        ("at-misaligned", ("--dtype", "u8", "--shape", "64", "--box", "16", "--at", "3"),
         ("coord_alignment", "coordinates"), 1),
        ("at-rank", ("--dtype", "u8", "--shape", "64", "--box", "16", "--at", "0,0"), ("coord_rank",), 1),
        ("cells-unknown", ("--dtype", "u8", "--shape", "64", "--box", "64", "--cells", "byte"), ("--cells", "byte")),
        ("svg-in-missing-folder", ("--dtype", "u8", "--shape", "64", "--box", "64", "--svg", "{tmp}/no-such/a.svg"),
         ("--svg", "no-such", "existing folder")),
        ("banks-unknown", ("--dtype", "u8", "--shape", "64", "--box", "64", "--banks", "diagonal"),
         ("--banks", "diagonal")),
        ("wgmma-c", ("--dtype", "u8", "--shape", "64", "--box", "64", "--wgmma", "C"), ("--wgmma", "'C'")),
        ("wgmma-rank-1", ("--dtype", "bf16", "--shape", "64", "--box", "64", "--wgmma", "B"), ("spec_rank",), 1),
        ("descriptor-text", ("--dtype", "u8", "--shape", "64", "--box", "64", "--descriptor", "xyz"),
         ("--descriptor", "xyz")),
        ("svg-folder", ("--dtype", "u8", "--shape", "64", "--box", "64", "--svg", "{tmp}"), ("--svg",)),
        ("rule-broken", ("--dtype", "f32", "--shape", "64,64", "--box", "16,64", "--swizzle", "32B"),
         ("rule", "swizzle_span"), 1),
    ]),
    *_cases(("check",), [
        ("target-unknown", ("--target", "sm_999x", "--dtype", "u8", "--shape", "256", "--box", "128"),
         ("--target", "sm_999x")),
        ("target-before-tma", ("--target", "sm_80", "--dtype", "u8", "--shape", "256", "--box", "128"),
         ("--target", "sm_80")),
        ("target-with-im2col", ("--im2col", "--target", "sm_100a", "--dtype", "f16", "--shape", "2,8,8,16",
                                "--lower-corner=-1,-1", "--upper-corner=-1,-1", "--channels-per-pixel", "16",
                                "--pixels-per-column", "32"), ("--target", "tiled")),
        ("packed-on-sm90", ("--target", "sm_90a", "--dtype", "16u4_align8b", "--shape", "256", "--box", "128"),
         ("needs_subbyte_maps",), 1),
        ("packed-box", ("--target", "sm_100a", "--dtype", "16u6_align16b", "--shape", "256", "--box", "64"),
         ("packed_box",), 1),
    ]),
    CliCase("cli-info-target-unknown-arch", ("info", "--target", "sm_42"), ("--target", "sm_42")),
]
