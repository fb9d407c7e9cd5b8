"""lpmpi's own instructions in a callgrind file: every function-summary line of the _core
extension, including code inlined from src/*.h (callgrind_annotate prints those without the
object's name: the file is src/... or lpmpi/_core.c)."""
import re
import subprocess
import sys

out = subprocess.run(["callgrind_annotate", "--threshold=100", sys.argv[1]], capture_output=True, text=True,
                     check=False).stdout
total = 0
line_re = re.compile(r"^\s*([\d,]+) \(\s*[\d.]+%\)\s+(\S+?):(\S+)(?:\s+\[(.+)\])?\s*$")
for ln in out.splitlines():
    if ln.startswith("-- Auto-annotated source"):
        break
    m = line_re.match(ln)
    if not m:
        continue
    n, path, _, obj = m.groups()
    if (obj and "_core.cpython" in obj) or (not obj and ("/src/" in path or path.startswith("src/")
                                                        or "lpmpi/_core.c" in path)):
        total += int(n.replace(",", ""))
print(total)
