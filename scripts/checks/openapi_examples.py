#!/usr/bin/env python3
"""Every example in an OpenAPI 3.1 document matches the schema beside it: parameter examples, and
request and response body examples (`example`, or each of `examples`, inline or a
`#/components/examples/…` reference), validated with JSON Schema 2020-12 against the document's
own components. tests/system/test_openapi.py (scripts/checks/openapi.sh, in its venv: PyYAML,
jsonschema) calls `check_examples(document)`; by hand:

    openapi_examples.py openapi.yaml

Prints one line per example that does not match and `N examples checked`; exits 1 when one does not
match, 2 when the document cannot be read.
"""
import sys
import urllib.parse

import jsonschema
import yaml
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

BASE = "urn:openapi-document"


def pointer(parts):
    return "/" + "/".join(str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def ref_parts(ref):
    """The path of a local reference (`#/components/…`), its escapes undone."""
    return [p.replace("~1", "/").replace("~0", "~") for p in ref[2:].split("/")]


def resolve(document, node):
    """An Example object or a reference to one, as its value."""
    seen = 0
    while isinstance(node, dict) and "$ref" in node and seen < 10:
        ref = node["$ref"]
        if not ref.startswith("#/"):
            raise ValueError(f"unsupported reference {ref}")
        node = document
        for part in ref_parts(ref):
            node = node[part]
        seen += 1
    return node


def examples_of(document, holder):
    """(name, value) of each example of a parameter or media type object."""
    if "example" in holder:
        yield "example", holder["example"]
    for name, example in (holder.get("examples") or {}).items():
        example = resolve(document, example)
        if "value" in example:
            yield name, example["value"]


def check_examples(document):
    """(number of examples checked, one line per mismatch: `where: at path: message`)."""
    registry = Registry().with_resource(BASE, Resource(contents=document, specification=DRAFT202012))
    checked = 0
    failures = []

    def check(where, schema_parts, value):
        nonlocal checked
        checked += 1
        ref = BASE + "#" + urllib.parse.quote(pointer(schema_parts), safe="/~")
        validator = jsonschema.Draft202012Validator({"$ref": ref}, registry=registry)
        errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
        for error in errors[:3]:
            at = "/".join(str(p) for p in error.absolute_path) or "(root)"
            failures.append(f"{where}: at {at}: {error.message[:300]}")

    def media(where, parts, content):
        for media_type, body in (content or {}).items():
            if "schema" not in body:
                continue
            for name, value in examples_of(document, body):
                check(f"{where} {media_type} example {name}", parts + ["content", media_type, "schema"], value)

    def parameter(where, parts, param):
        resolved = resolve(document, param)
        target = ref_parts(param["$ref"]) if "$ref" in param else parts
        if "schema" in resolved:
            for name, value in examples_of(document, resolved):
                check(f"{where} parameter {resolved['name']} {name}", target + ["schema"], value)

    for route, item in (document.get("paths") or {}).items():
        for index, param in enumerate(item.get("parameters") or []):
            parameter(route, ["paths", route, "parameters", index], param)
        for method, operation in item.items():
            if method not in ("get", "put", "post", "delete", "patch", "head", "options", "trace"):
                continue
            where = f"{method.upper()} {route}"
            base = ["paths", route, method]
            for index, param in enumerate(operation.get("parameters") or []):
                parameter(where, base + ["parameters", index], param)
            body = operation.get("requestBody")
            if body:
                parts = base + ["requestBody"]
                if "$ref" in body:
                    parts = ref_parts(body["$ref"])
                media(f"{where} request", parts, resolve(document, body).get("content"))
            for status, response in (operation.get("responses") or {}).items():
                parts = base + ["responses", status]
                if "$ref" in response:
                    parts = ref_parts(response["$ref"])
                media(f"{where} {status}", parts, resolve(document, response).get("content"))
    return checked, failures


def main(path):
    try:
        with open(path, encoding="utf-8") as f:
            document = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as e:
        print(f"openapi_examples: cannot read {path}: {e}", file=sys.stderr)
        return 2
    checked, failures = check_examples(document)
    for line in failures:
        print(f"openapi_examples: {line}")
    print(f"openapi_examples: {checked} examples checked, {len(failures)} mismatches")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: openapi_examples.py openapi.yaml", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
