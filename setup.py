"""Package setup, driven by settings.ini (nbdev 2's single source of metadata).

Unlike nbdev's template this does not import `pkg_resources`, which current setuptools no longer ships.
"""
import shutil
from configparser import ConfigParser
from pathlib import Path

import setuptools
from setuptools.command.build_py import build_py

config = ConfigParser(delimiters=["="])
config.read("settings.ini", encoding="utf-8")
cfg = config["DEFAULT"]

licenses = {"apache2": ("Apache Software License 2.0", "OSI Approved :: Apache Software License")}
statuses = ["1 - Planning", "2 - Pre-Alpha", "3 - Alpha", "4 - Beta", "5 - Production/Stable", "6 - Mature", "7 - Inactive"]
py_versions = ["3.9", "3.10", "3.11", "3.12", "3.13", "3.14"]


def version_tuple(v):
    return tuple(int(part) for part in v.split("."))


class build_py_with_exercises(build_py):
    "Ship the exercise notebooks (nbs/exercises/*.ipynb, the source nbdev renders) inside the package, as `exercises/`."
    def run(self):
        super().run()
        dest = Path(self.build_lib) / cfg["lib_path"] / "exercises"
        dest.mkdir(parents=True, exist_ok=True)
        for nb in sorted(Path(cfg["nbs_path"], "exercises").glob("ex*.ipynb")): shutil.copyfile(nb, dest / nb.name)


min_python = cfg["min_python"]
lic = licenses[cfg["license"].lower()]

setuptools.setup(
    name=cfg["lib_name"],
    version=cfg["version"],
    description=cfg["description"],
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    author=cfg["author"],
    author_email=cfg["author_email"],
    license=lic[0],
    url=cfg["git_url"],
    keywords=cfg["keywords"].split(),
    classifiers=[
        f"Development Status :: {statuses[int(cfg['status'])]}",
        f"Intended Audience :: {cfg['audience'].title()}",
        f"License :: {lic[1]}",
        f"Natural Language :: {cfg['language'].title()}",
    ]
    + [f"Programming Language :: Python :: {v}" for v in py_versions if version_tuple(v) >= version_tuple(min_python)],
    python_requires=f">={min_python}",
    packages=setuptools.find_packages(include=[cfg["lib_path"], cfg["lib_path"] + ".*"]),
    include_package_data=True,
    install_requires=cfg["requirements"].split(),
    extras_require={"dev": cfg["dev_requirements"].split(), "triton": ["triton"]},  # triton: chapter 19a's kernels (flash_triton)
    entry_points={
        "console_scripts": cfg["console_scripts"].split(),
        "nbdev": [f"{cfg['lib_path']}={cfg['lib_path']}._modidx:d"],
    },
    zip_safe=False,
    cmdclass={"build_py": build_py_with_exercises},
)
