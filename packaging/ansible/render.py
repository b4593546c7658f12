#!/usr/bin/python3
"""Render the monky_deployd role's config template outside ansible, for CI.

usage: render.py VARS.json > config.yaml

The role's defaults/main.yml is read first, VARS.json overrides it, and the template
is rendered with the options ansible's template module uses (trim_blocks=True,
keep_trailing_newline=True). Needs Debian's python3-jinja2 and python3-yaml.
"""
import json
import pathlib
import sys

import jinja2
import yaml

ROLE = pathlib.Path(__file__).resolve().parent / "roles" / "monky_deployd"


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    variables = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text()) or {}
    variables.update(json.loads(pathlib.Path(argv[1]).read_text()))
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(ROLE / "templates")),
        trim_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
    )
    sys.stdout.write(env.get_template("config.yaml.j2").render(**variables))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
