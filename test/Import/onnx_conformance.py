#!/usr/bin/python3
"""Run Cleave's ONNX importer over the official ONNX node test suite.

Every case folder of the suite (``<suite>/<case>/model.onnx``) is imported with
``cleave-translate --import-onnx``; the IR it prints is parsed back with
``cleave-opt``. Each case is classified as

  passed   the importer exits 0 and cleave-opt accepts its output;
  skipped  the importer rejects the model with one of the diagnostics it uses
           for deliberately unsupported features (see SKIP_PHRASES);
  failed   anything else: another error, a crash (signal), a timeout, or
           cleave-opt rejecting the printed IR.

Models of opsets 7 to 12 are converted to opset 13 by the importer (libonnx's
version converter); the report counts the passed cases that were.

The report is a per-op table, the failed cases with their first error line,
the skip reasons with counts, the passed cases converted from older opsets,
and a final line ``N passed, N failed, N skipped``.

Usage (from the repository root):

  /usr/bin/python3 test/Import/onnx_conformance.py [--jobs 2] [--filter add]
      [--translate build/bin/cleave-translate] [--opt build/bin/cleave-opt]
      [--suite /usr/share/libonnx-testdata/data/node] [--json results.json]
      [--max-failures N]

The exit status is 0 unless the suite or a tool is missing, or more than
--max-failures cases failed (the default, -1, never fails on failures).
"""

import argparse
import collections
import concurrent.futures
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

DEFAULT_SUITE = "/usr/share/libonnx-testdata/data/node"

# Diagnostic phrases of the importer for features it deliberately leaves out.
# The phrase is the skip reason bucket.
SKIP_PHRASES = (
    "unsupported ONNX op",
    "uses opset",
    "unsupported element type",
    "must be known at import time",
    "is not supported",
    "only ONNX-domain models are supported",
    "empty tensors are not supported",
    "has unknown dimension",
    "has no shape",
    # A limit of libonnx's version converter (opsets 7 to 12 are converted).
    "the ONNX version converter cannot convert",
)

# The importer's note on a model of opset 7 to 12 that it converted.
CONVERTED_NOTE = re.compile(r"note: converted the model from opset (\d+)")

# How much of a tool's stderr a result keeps.
MAX_MESSAGE_CHARS = 400


# The location prefix of an MLIR diagnostic: "path/model.onnx:0:0: ".
LOCATION_PREFIX = re.compile(r"^\S+:\d+:\d+: ")


def first_error_line(text):
    """Returns the most telling line of a tool's stderr, without its location
    prefix: the first line that mentions an error, else the first non-empty
    line."""
    lines = [LOCATION_PREFIX.sub("", line.strip())
             for line in text.splitlines() if line.strip()]
    for line in lines:
        if "error" in line.lower() or "assert" in line.lower():
            return line[:MAX_MESSAGE_CHARS]
    return lines[0][:MAX_MESSAGE_CHARS] if lines else ""


def skip_reason(message):
    """Returns the SKIP_PHRASES bucket of an importer diagnostic, or None."""
    if not message.startswith("error:") and "error:" not in message:
        return None
    for phrase in SKIP_PHRASES:
        if phrase in message:
            return phrase
    return None


def signal_name(returncode):
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return "signal %d" % -returncode


def model_op_types(model_path):
    """Returns the sorted op types of the model's main graph, or None when the
    model cannot be loaded by the onnx package."""
    try:
        import onnx  # pylint: disable=import-outside-toplevel
        model = onnx.load(model_path, load_external_data=False)
    except Exception:  # pylint: disable=broad-except
        return None
    domains = {}
    for node in model.graph.node:
        op = node.op_type
        if node.domain and node.domain not in ("ai.onnx", ""):
            op = "%s.%s" % (node.domain, op)
        domains[op] = True
    return sorted(domains)


def run_case(case_dir, translate, opt, timeout, compiler=None):
    """Imports one case and returns its result as a dict."""
    name = os.path.basename(case_dir)
    model = os.path.join(case_dir, "model.onnx")
    result = {"case": name, "ops": model_op_types(model)}
    start = time.monotonic()

    def finish(status, message="", reason=None, stage=None):
        result["status"] = status
        result["message"] = message
        if reason:
            result["reason"] = reason
        if stage:
            result["stage"] = stage
        result["seconds"] = round(time.monotonic() - start, 3)
        return result

    try:
        imported = subprocess.run(
            [translate, "--import-onnx", model],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return finish("failed", "timeout after %gs" % timeout, stage="import")
    stderr = imported.stderr.decode("utf-8", "replace")
    if imported.returncode < 0:
        message = "crash (%s)" % signal_name(imported.returncode)
        detail = first_error_line(stderr)
        if detail:
            message += ": " + detail
        return finish("failed", message, stage="import")
    if imported.returncode != 0:
        message = first_error_line(stderr) or (
            "exit %d without a diagnostic" % imported.returncode)
        reason = skip_reason(message)
        if reason:
            return finish("skipped", message, reason=reason)
        return finish("failed", message, stage="import")
    if not imported.stdout.strip():
        return finish("failed", "importer exited 0 but printed no IR",
                      stage="import")
    converted = CONVERTED_NOTE.search(stderr)
    if converted:
        result["converted_from"] = int(converted.group(1))

    try:
        parsed = subprocess.run(
            [opt, "-"], input=imported.stdout,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return finish("failed", "cleave-opt: timeout after %gs" % timeout,
                      stage="reparse")
    if parsed.returncode != 0:
        stderr = parsed.stderr.decode("utf-8", "replace")
        if parsed.returncode < 0:
            message = "crash (%s)" % signal_name(parsed.returncode)
            detail = first_error_line(stderr)
            if detail:
                message += ": " + detail
        else:
            message = first_error_line(stderr) or (
                "exit %d" % parsed.returncode)
        return finish("failed", "cleave-opt: " + message, stage="reparse")
    if not compiler:
        return finish("passed")
    return execute_case(case_dir, model, compiler, timeout, finish)


# Cases whose expected data Cleave deliberately does not reproduce. They are
# still reported as failed, with the reason; --max-failures counts the others.
KNOWN_DIFFERENCES = {
    "test_cast_FLOAT_to_BFLOAT16":
        "the suite truncates f32 to bf16; Cleave rounds to nearest even, as "
        "PyTorch and the hardware do",
    "test_castlike_BFLOAT16_to_FLOAT_expanded":
        "the suite's data for input 'like' has shape [1], the model declares "
        "[3, 4]",
    "test_castlike_FLOAT_to_BFLOAT16_expanded":
        "the suite's data for input 'like' has shape [1], the model declares "
        "[3, 4]",
}

# The ONNX backend tests' default tolerances (onnx/backend/test/runner).
RTOL, ATOL = 1e-3, 1e-7


def as_program_array(tensor, declared_type, numpy_helper, np):
    """The values of a TensorProto as the compiled program reads and writes
    them in .npy files: f64 was imported as f32, and bf16 (no NumPy type)
    travels as f32. The suite stores bf16 data as uint16 bits, so the
    model's declared type (`declared_type`) decides."""
    array = numpy_helper.to_array(tensor)
    if array.dtype == np.float64:
        return array.astype(np.float32)
    if declared_type == 16:  # BFLOAT16
        bits = array.astype(np.uint32) << 16
        return bits.view(np.float32).reshape(array.shape)
    return array


def run_step(args, timeout):
    """Runs one tool; returns None on success, else what went wrong (a
    timeout, a crash, or the first error line)."""
    try:
        done = subprocess.run(args, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=timeout,
                              check=False)
    except subprocess.TimeoutExpired:
        return "timeout after %gs" % timeout
    if done.returncode == 0:
        return None
    message = first_error_line(done.stderr.decode("utf-8", "replace"))
    if done.returncode < 0:
        message = "crash (%s) %s" % (signal_name(done.returncode), message)
    return message or "exit %d" % done.returncode


def execute_case(case_dir, model_path, compiler, timeout, finish):
    """Compiles the case, runs it on each test data set and compares the
    outputs with the expected ones."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    import onnx  # pylint: disable=import-outside-toplevel
    from onnx import numpy_helper  # pylint: disable=import-outside-toplevel

    model = onnx.load(model_path, load_external_data=False)
    initializers = {t.name for t in model.graph.initializer}
    inputs = [(i.name, i.type.tensor_type.elem_type)
              for i in model.graph.input if i.name not in initializers]
    outputs = [(o.name, o.type.tensor_type.elem_type)
               for o in model.graph.output]
    with tempfile.TemporaryDirectory() as work:
        prog = os.path.join(work, "prog")
        problem = run_step([compiler, model_path, "-o", prog], timeout)
        if problem:
            return finish("failed", "compile: " + problem, stage="compile")
        data_sets = sorted(d for d in os.listdir(case_dir)
                           if d.startswith("test_data_set_"))
        for data_set in data_sets:
            folder = os.path.join(case_dir, data_set)
            args = [prog, "--output-dir", os.path.join(work, data_set)]
            for i, (name, declared) in enumerate(inputs):
                tensor = onnx.TensorProto()
                with open(os.path.join(folder, "input_%d.pb" % i), "rb") as f:
                    tensor.ParseFromString(f.read())
                array = as_program_array(tensor, declared, numpy_helper, np)
                path = os.path.join(work, "%s-in%d.npy" % (data_set, i))
                np.save(path, array)
                args += ["--input", "%s=%s" % (name, path)]
            problem = run_step(args, timeout)
            if problem:
                return finish("failed", "run: " + problem, stage="run")
            for i, (name, declared) in enumerate(outputs):
                tensor = onnx.TensorProto()
                with open(os.path.join(folder, "output_%d.pb" % i), "rb") as f:
                    tensor.ParseFromString(f.read())
                expected = as_program_array(tensor, declared, numpy_helper,
                                            np)
                got = np.load(os.path.join(work, data_set, name + ".npy"))
                if got.shape != expected.shape:
                    return finish("failed", "output %s: shape %s, expected %s"
                                  % (name, list(got.shape),
                                     list(expected.shape)), stage="compare")
                if expected.dtype.kind in "biu":
                    ok = np.array_equal(got.astype(expected.dtype), expected)
                else:
                    ok = np.allclose(got.astype(np.float64),
                                     expected.astype(np.float64),
                                     rtol=RTOL, atol=ATOL, equal_nan=True)
                if not ok:
                    diff = np.abs(got.astype(np.float64) -
                                  expected.astype(np.float64))
                    return finish("failed", "output %s differs: max |diff| "
                                  "%.3g" % (name, float(np.nanmax(diff))),
                                  stage="compare")
    return finish("passed")


def find_cases(suite, substring):
    cases = []
    for entry in sorted(os.listdir(suite)):
        path = os.path.join(suite, entry)
        if substring and substring not in entry:
            continue
        if os.path.isfile(os.path.join(path, "model.onnx")):
            cases.append(path)
    return cases


def resolve_tool(path):
    """Returns an executable path for a tool given as a path or a bare name."""
    if os.path.sep not in path:
        found = shutil.which(path)
        if found:
            return found
    if os.path.isfile(path) and os.access(path, os.X_OK):
        return os.path.abspath(path)
    return None


def print_report(results, max_failed_lines, out):
    per_op = collections.defaultdict(collections.Counter)
    for result in results:
        for op in result["ops"] or ["<unreadable model>"]:
            per_op[op][result["status"]] += 1

    width = max([len("op")] + [len(op) for op in per_op])
    out.write("%-*s %7s %7s %7s\n" % (width, "op", "passed", "failed",
                                       "skipped"))
    for op in sorted(per_op):
        counts = per_op[op]
        out.write("%-*s %7d %7d %7d\n" % (width, op, counts["passed"],
                                           counts["failed"],
                                           counts["skipped"]))

    failed = [r for r in results if r["status"] == "failed"]
    out.write("\nfailed cases (%d):\n" % len(failed))
    for result in failed[:max_failed_lines]:
        if result["case"] in KNOWN_DIFFERENCES:
            result = dict(result, message=result["message"] + " [known: " +
                          KNOWN_DIFFERENCES[result["case"]] + "]")
        out.write("  %s: %s\n" % (result["case"], result["message"]))
    if len(failed) > max_failed_lines:
        out.write("  ... %d more (use --json for all)\n"
                  % (len(failed) - max_failed_lines))

    reasons = collections.Counter(
        r["reason"] for r in results if r["status"] == "skipped")
    out.write("\nskip reasons:\n")
    for reason, count in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])):
        out.write("  %5d  %s\n" % (count, reason))

    converted = collections.Counter(
        r["converted_from"] for r in results
        if r["status"] == "passed" and "converted_from" in r)
    if converted:
        out.write("\npassed after conversion to opset 13: %d (%s)\n" % (
            sum(converted.values()),
            ", ".join("opset %d: %d" % kv for kv in sorted(converted.items()))))

    totals = collections.Counter(r["status"] for r in results)
    out.write("\n%d passed, %d failed, %d skipped\n"
              % (totals["passed"], totals["failed"], totals["skipped"]))
    return totals


def main():
    parser = argparse.ArgumentParser(
        description="Run cleave-translate --import-onnx over the ONNX node "
                    "test suite.")
    parser.add_argument("--suite", default=DEFAULT_SUITE,
                        help="folder of the node test cases (default: %(default)s)")
    parser.add_argument("--translate", default="build/bin/cleave-translate",
                        help="cleave-translate binary (default: %(default)s)")
    parser.add_argument("--opt", default="build/bin/cleave-opt",
                        help="cleave-opt binary (default: %(default)s)")
    parser.add_argument("--jobs", type=int, default=2,
                        help="cases run in parallel (default: %(default)s)")
    parser.add_argument("--filter", default="",
                        help="only cases whose folder name contains SUBSTR")
    parser.add_argument("--timeout", type=float, default=20.0,
                        help="seconds per tool invocation (default: %(default)s)")
    parser.add_argument("--max-failures", type=int, default=-1,
                        help="exit 1 if more than N cases fail; -1 never "
                             "(default: %(default)s)")
    parser.add_argument("--max-failed-lines", type=int, default=200,
                        help="failed cases listed in the report "
                             "(default: %(default)s)")
    parser.add_argument("--json", metavar="FILE",
                        help="write the per-case results to FILE")
    parser.add_argument("--compile", metavar="PATH", default="",
                        help="also compile each imported case with this "
                             "cleave-compile, run it on the case's test data "
                             "and compare the outputs (rtol 1e-3, atol 1e-7)")
    args = parser.parse_args()

    if not os.path.isdir(args.suite):
        sys.stderr.write("error: ONNX node test suite not found at '%s'\n"
                         % args.suite)
        return 2
    translate = resolve_tool(args.translate)
    opt = resolve_tool(args.opt)
    compiler = resolve_tool(args.compile) if args.compile else None
    if args.compile and not compiler:
        sys.stderr.write("error: no executable at '%s'\n" % args.compile)
        return 2
    for given, found in ((args.translate, translate), (args.opt, opt)):
        if not found:
            sys.stderr.write("error: no executable at '%s'\n" % given)
            return 2
    try:
        import onnx  # noqa: F401  pylint: disable=unused-import,import-outside-toplevel
    except ImportError:
        sys.stderr.write("error: the 'onnx' Python package is not installed "
                         "(try /usr/bin/python3)\n")
        return 2

    cases = find_cases(args.suite, args.filter)
    if not cases:
        sys.stderr.write("error: no test cases in '%s'%s\n" % (
            args.suite, " match '%s'" % args.filter if args.filter else ""))
        return 2

    results = []
    with concurrent.futures.ThreadPoolExecutor(
            max_workers=max(1, args.jobs)) as pool:
        futures = [pool.submit(run_case, case, translate, opt, args.timeout,
                               compiler)
                   for case in cases]
        for future in concurrent.futures.as_completed(futures):
            results.append(future.result())
    results.sort(key=lambda r: r["case"])

    totals = print_report(results, args.max_failed_lines, sys.stdout)
    sys.stdout.flush()

    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"translate": translate, "opt": opt,
                       "suite": os.path.abspath(args.suite),
                       "totals": dict(totals), "cases": results},
                      handle, indent=1)
            handle.write("\n")

    unexpected = sum(1 for r in results if r["status"] == "failed"
                     and r["case"] not in KNOWN_DIFFERENCES)
    if 0 <= args.max_failures < unexpected:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
