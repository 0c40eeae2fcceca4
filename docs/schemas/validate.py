#!/usr/bin/env python3
"""Checks JSON documents against one of pushworker's schemas.

    docs/schemas/validate.py docs/schemas/job.schema.json job.json [more.json …]

Prints one line per file: "valid", "invalid: <the first error>", or "not-json: <why>".
Needs python3-jsonschema (Debian) or `pip install jsonschema`.
"""
import json
import os
import sys

import jsonschema


def inline(node, directory):
    """Replaces a `{"$ref": "other.schema.json"}` by that sibling schema: the same result with
    every jsonschema release (their ways of resolving references differ)."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.endswith(".schema.json") and "/" not in ref:
            other = json.load(open(os.path.join(directory, ref), encoding="utf-8"))
            other.pop("$schema", None)
            other.pop("$id", None)
            return inline(other, directory)
        return {key: inline(value, directory) for key, value in node.items()}
    if isinstance(node, list):
        return [inline(value, directory) for value in node]
    return node


def main() -> int:
    schema = inline(json.load(open(sys.argv[1], encoding="utf-8")), os.path.dirname(os.path.abspath(sys.argv[1])))
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
