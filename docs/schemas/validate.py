#!/usr/bin/env python3
"""Checks JSON documents against one of pushworker's schemas.

    docs/schemas/validate.py docs/schemas/job.schema.json job.json [more.json …]

Prints one line per file: "valid", "invalid: <the first error>", or "not-json: <why>".
Needs python3-jsonschema (Debian) or `pip install jsonschema`.
"""
import json
import sys

import jsonschema


def main() -> int:
    schema = json.load(open(sys.argv[1], encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    for path in sys.argv[2:]:
        try:
            with open(path, "rb") as handle:
                document = json.loads(handle.read().decode("utf-8"))
        except (ValueError, RecursionError, UnicodeDecodeError) as error:
            print(f"not-json: {type(error).__name__}")
            continue
        errors = sorted(validator.iter_errors(document), key=lambda e: list(e.path))
        print("valid" if not errors else "invalid: " + "/".join(map(str, errors[0].path)) + ": " + errors[0].message[:200])
    return 0


if __name__ == "__main__":
    sys.exit(main())
