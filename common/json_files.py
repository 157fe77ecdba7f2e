"""Reading the project's JSON records (a run's config.json and best.json, an export's settings)."""

import json
import os


def read_json(path, error_class):
    """The JSON file at `path` as a dict, None if absent; `error_class` for a file that is not JSON."""
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as handle:
        try:
            return json.load(handle)
        except ValueError as error:
            raise error_class(f"{path} is not valid JSON: {error}") from error


def write_json_atomically(path, value):
    """Writes `value` as indented JSON beside `path`, then renames it into place (never half a file)."""
    temporary = f"{path}.tmp-{os.getpid()}"
    try:
        with open(temporary, "w", encoding="utf-8") as handle:
            json.dump(value, handle, indent=1, ensure_ascii=False)
            handle.write("\n")
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)
