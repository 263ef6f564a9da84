"""setuptools glue for the awrepl wheels (pyproject.toml holds the metadata; docs/packaging.md).

scripts/wheels.ts stages this directory with the executable of one release target in ``bin/`` and a
``wheel-target.json`` naming it, its wheel platform tag and the version. From that this file makes a
platform wheel ``awrepl-<version>-py3-none-<platform>.whl`` whose ``.data/scripts/`` holds the
executable (mode 0755), so pip installs it as the environment's ``awrepl`` command.

Without ``wheel-target.json`` (building from a checkout) it makes the client-only ``py3-none-any``
wheel, its version read from the repository's package.json: the client then finds the executable
through ``AWREPL_BIN`` or ``PATH``.
"""

import json
import os

import setuptools  # noqa: F401  (first: it provides distutils on Python 3.12+)
from distutils.command.build_scripts import build_scripts
from setuptools import setup

try:  # setuptools 70.1+ carries bdist_wheel itself
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:
    from wheel.bdist_wheel import bdist_wheel

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET_FILE = os.path.join(HERE, "wheel-target.json")


def read_target():
    if not os.path.exists(TARGET_FILE):
        return None
    with open(TARGET_FILE, encoding="utf-8") as f:
        target = json.load(f)
    for key in ("version", "platform", "executable"):
        if not isinstance(target.get(key), str) or not target[key]:
            raise SystemExit("%s: %r must be a non-empty string" % (TARGET_FILE, key))
    if not os.path.isfile(os.path.join(HERE, target["executable"])):
        raise SystemExit("%s: the executable %s is missing" % (TARGET_FILE, target["executable"]))
    return target


def checkout_version():
    package_json = os.path.join(HERE, "..", "package.json")
    with open(package_json, encoding="utf-8") as f:
        return json.load(f)["version"]


def readme():
    """The project's README (staged beside this file for a platform wheel; in a checkout, one level up)."""
    path = next(p for p in (os.path.join(HERE, "README.md"), os.path.join(HERE, "..", "README.md")) if os.path.exists(p))
    with open(path, encoding="utf-8") as f:
        return {"long_description": f.read(), "long_description_content_type": "text/markdown"}


class build_verbatim_scripts(build_scripts):
    """Copies the scripts byte for byte, keeping their mode.

    distutils opens every script as text to look for a ``#!python`` line to rewrite; the script here is
    a compiled executable, which that would fail to decode (or could corrupt).
    """

    def copy_scripts(self):
        self.mkpath(self.build_dir)
        outfiles = []
        for script in self.scripts:
            outfile = os.path.join(self.build_dir, os.path.basename(script))
            self.copy_file(script, outfile, preserve_mode=True)
            os.chmod(outfile, 0o755)
            outfiles.append(outfile)
        return outfiles, outfiles


def platform_wheel(platform):
    class bdist_platform_wheel(bdist_wheel):
        """Tags the wheel py3-none-<platform>: any Python 3, no ABI, the executable's platform.

        The platform is a compressed tag set (``manylinux_2_17_x86_64.manylinux2014_x86_64``), which
        ``--plat-name`` would mangle (it turns dots into underscores), so the tag is set here.
        """

        def get_tag(self):
            return ("py3", "none", platform)

    return bdist_platform_wheel


target = read_target()
if target:
    setup(
        version=target["version"],
        scripts=[target["executable"]],
        cmdclass={"build_scripts": build_verbatim_scripts, "bdist_wheel": platform_wheel(target["platform"])},
        **readme(),
    )
else:
    setup(version=checkout_version(), **readme())
