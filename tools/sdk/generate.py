"""Regenerate ``sdk/python`` from the API's OpenAPI document (issue 20), or check it is current.

The document comes from the app itself (``automation.api.app.create_api``; no server, no
ledger opened), is written to ``sdk/python/openapi.json`` (the contract, committed), and
``datamodel-code-generator`` turns its schemas into ``anycloud_sdk/models.py``: pydantic v2,
snake_case attributes over the camelCase keys, unknown fields kept (``extra="allow"``) and
enums open to values a newer server adds. Both files are committed; ``--check`` (run by
``make test``) regenerates into a temporary directory and fails on any difference.

    python -m tools.sdk.generate [--check]
"""

from __future__ import annotations

import argparse
import difflib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SDK = ROOT / "sdk" / "python"
DOCUMENT = SDK / "openapi.json"
MODELS = SDK / "anycloud_sdk" / "models.py"
HEADER = '"""Generated from sdk/python/openapi.json by tools/sdk/generate.py: do not edit."""\n'


def openapi_document() -> str:
    from automation.api.app import create_api
    from automation.app import App
    from automation.ledger.db import Ledger

    # The document needs no ledger: a Ledger object that is never opened.
    api = create_api(App(ledger=Ledger("sqlite://"), home=Path("/nonexistent")), limiter=None)
    return json.dumps(api.openapi(), indent=2, sort_keys=True) + "\n"


def models(document: Path, out: Path) -> str:
    codegen = Path(sys.executable).with_name("datamodel-codegen")
    if not codegen.exists():
        raise SystemExit(f"{codegen} is missing: install the dev extra (make setup) to "
                         "generate the SDK")
    subprocess.run([
        str(codegen), "--input", str(document), "--input-file-type", "openapi",
        "--output", str(out), "--output-model-type", "pydantic_v2.BaseModel",
        "--target-python-version", "3.11", "--snake-case-field",
        "--allow-population-by-field-name", "--extra-fields", "allow", "--open-enums", "all",
        "--use-annotated", "--use-standard-collections", "--use-union-operator",
        "--disable-timestamp", "--formatters", "ruff-format", "--custom-file-header",
        HEADER.strip(),
    ], check=True, capture_output=True, text=True)
    return out.read_text()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="fail (exit 1) when the committed SDK is not what the API makes")
    check = parser.parse_args().check
    with tempfile.TemporaryDirectory() as tmp:
        document = Path(tmp) / "openapi.json"
        document.write_text(openapi_document())
        fresh = {DOCUMENT: document.read_text(), MODELS: models(document, Path(tmp) / "m.py")}
    if not check:
        for path, text in fresh.items():
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")
        return 0
    stale = False
    for path, text in fresh.items():
        old = path.read_text() if path.exists() else ""
        if old != text:
            stale = True
            diff = difflib.unified_diff(old.splitlines(), text.splitlines(), str(path),
                                        "regenerated", lineterm="", n=1)
            print("\n".join(list(diff)[:40]), file=sys.stderr)
    if stale:
        print("sdk/python is stale: run python -m tools.sdk.generate and commit", file=sys.stderr)
        return 1
    print("sdk/python matches the API")
    return 0


if __name__ == "__main__":
    sys.exit(main())
