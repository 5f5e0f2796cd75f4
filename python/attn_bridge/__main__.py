"""python -m attn_bridge declare SPEC: the declaration of the kernel SPEC ("module:function")
for the configure step, as key=value lines; exit 0. On failure one line "error=..." and exit
1 (the spec or the module is wrong: configure fails) or 3 ("missing=<module>": a module the
kernel needs is not installed here, e.g. torch: its tests are skipped with the reason)."""
import sys
import traceback

from . import DeclarationError, SpecError, resolve


def declare(spec):
    module = spec.split(":")[0]
    try:
        _, decl, root = resolve(spec)
    except (SpecError, DeclarationError) as e:
        print(f"error={e}")
        return 1
    except ModuleNotFoundError as e:
        # the spec's own module (or a package of it) missing is a typo; another module is a
        # dependency this machine lacks
        if e.name and (module == e.name or module.startswith(e.name + ".")):
            print(f"error='{spec}': no module {e.name} on the path")
            return 1
        print(f"missing={e.name}")
        print(f"error='{spec}': {module} needs {e.name}, which is not installed for {sys.executable}")
        return 3
    except BaseException:
        lines = traceback.format_exc().strip().splitlines()
        print(f"error='{spec}': importing {module} failed: " + " | ".join(l.strip() for l in lines[-6:]))
        return 1
    for line in decl.cmake_lines():
        print(line)
    print(f"root={root}")
    return 0


def main(argv):
    if len(argv) >= 1 and argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    if len(argv) != 2 or argv[0] != "declare":
        print("usage: python -m attn_bridge declare MODULE:FUNCTION (--help)", file=sys.stderr)
        return 2
    return declare(argv[1])


sys.exit(main(sys.argv[1:]))
