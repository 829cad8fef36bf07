"""Validates constrained outputs against their JSON schemas with the `jsonschema` package.

Reads a JSON list of {"name", "schema", "output"} on stdin (output: the generated text) and
writes a JSON object: "failures", a list of {"name", "error"}, and "formats", the string
formats the suite's schemas use. Formats are checked as the schema's draft defines them (the
draft's own format checker: jsonschema's global one checks `time` as draft 3 did). Every
format used must be one this installation really checks (some need optional packages,
rfc3339-validator for date-time and time); otherwise the validation would pass for nothing,
and the script fails instead.
"""

import json
import sys

import jsonschema
from jsonschema.validators import validator_for


def formats_in(node, found):
    if isinstance(node, dict):
        if isinstance(node.get("format"), str):
            found.add(node["format"])
        for value in node.values():
            formats_in(value, found)
    elif isinstance(node, list):
        for value in node:
            formats_in(value, found)
    return found


def main():
    cases = json.load(sys.stdin)
    failures = []
    used = set()
    for case in cases:
        schema = case["schema"]
        cls = validator_for(schema, default=jsonschema.Draft202012Validator)
        cls.check_schema(schema)
        checker = cls.FORMAT_CHECKER
        formats = formats_in(schema, set())
        unchecked = sorted(formats - set(checker.checkers))
        if unchecked:
            sys.exit(f"{case['name']}: formats this jsonschema does not check: {unchecked}")
        used |= formats
        try:
            value = json.loads(case["output"])
        except ValueError as e:
            failures.append({"name": case["name"], "error": f"not JSON: {e}"})
            continue
        errors = sorted(cls(schema, format_checker=checker).iter_errors(value), key=str)
        if errors:
            failures.append({"name": case["name"], "error": errors[0].message})
    json.dump({"failures": failures, "formats": sorted(used)}, sys.stdout)


main()
