"""Where the installed package's parts live in the checkout: the one declaration that setup.py builds the wheel
from, that the layering test reads the code by, and that the Slurm code snapshot lays a copy out by.

The folders keep the layout the project is specified with (bench/, methods/, tasks/, results/, slurm/); the
import names put everything under ``commbench``, so they cannot collide with a user's own ``methods`` or
``tasks``. Two data packages carry what a command needs outside a checkout: the papers' reference tables and
the Slurm cluster profiles (grids ship inside ``commbench`` itself). This module imports nothing: setup.py reads
it before anything is installed.
"""

# import package -> its folder in the checkout (code packages: every folder below with an __init__.py is one)
CODE = {"commbench": "bench", "commbench.methods": "methods", "commbench.tasks": "tasks"}
# data package -> its folder, and the files it ships (read with importlib.resources)
DATA = {"commbench.paper_data": ("results/paper", ["*.csv", "*.yaml", "README.md"]),
        "commbench.profiles": ("slurm/profiles", ["*.yaml"])}
# files a code package ships beside its modules
CODE_DATA = {"commbench": ["grids/*.yaml", "grids/campaign/*.yaml", "grids/zoo/*.yaml", "clusters/*.yaml"]}


def package_dirs() -> dict[str, str]:
    return {**CODE, **{name: folder for name, (folder, _) in DATA.items()}}
