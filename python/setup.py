"""Bundles the libtessera-rt.so this checkout built (or $TESSERA_RT_LIBRARY)
into the package as tessera/_lib/libtessera-rt.so (and the PyTorch front's
native engine, libtessera-torch.so, when it was built beside it), so that an installed
package finds its library without a path. Without one, the package is
pure Python and finds the library at run time (tessera.rt's search)."""
import glob
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def _library():
    env = os.environ.get("TESSERA_RT_LIBRARY")
    if env:
        if not os.path.isfile(env):
            raise SystemExit("TESSERA_RT_LIBRARY=%s: no such file" % env)
        return env
    found = sorted(glob.glob(os.path.join(HERE, "..", "build", "*", "lib", "libtessera-rt.so")),
                   key=os.path.getmtime)
    return found[-1] if found else None


class BuildPy(build_py):
    def run(self):
        super().run()
        lib = _library()
        if lib:
            dst = os.path.join(self.build_lib, "tessera", "_lib")
            os.makedirs(dst, exist_ok=True)
            shutil.copy2(os.path.realpath(lib), os.path.join(dst, "libtessera-rt.so"))
            print("tessera: bundled %s" % lib)
            # the PyTorch front's native engine, where it was built beside it
            native = os.path.join(os.path.dirname(lib), "libtessera-torch.so")
            if os.path.isfile(native):
                shutil.copy2(os.path.realpath(native), os.path.join(dst, "libtessera-torch.so"))
                print("tessera: bundled %s" % native)
        else:
            print("tessera: no libtessera-rt.so built (make, or set TESSERA_RT_LIBRARY): "
                  "the package will look for it at run time")


setup(cmdclass={"build_py": BuildPy})
