"""Write pcie8.xml: the paper's kind of machine, 8 GPUs behind a tree of PCIe switches.

    socket0 ==QPI== socket1          (root complexes; host-side link between them)
     /    \\           /    \\
   sw0    sw1       sw2    sw3        (PCIe switches, e.g. PLX 8747)
   / \\    / \\       / \\    / \\
  g0 g1  g2 g3     g4 g5  g6 g7       (GPUs = MPI ranks, hostfile order g0..g7)

Every link about 10 GB/s per direction (PCIe 3.0 x16 in practice; full duplex: SPLITDUPLEX)
and 1.5 us, so a GPU-to-GPU message costs 3 us under one switch, 6 us across switches and
7.5 us across sockets: of the order of CUDA-aware MPI latencies between GPUs.  The QPI link is
also given 10 GB/s (GPU peer traffic across sockets is no faster than that).
Run: python sim/platforms/gen_pcie8.py > sim/platforms/pcie8.xml
"""
BW, LAT = "10GBps", "1.5us"
parent = {f"g{i}": f"sw{i // 2}" for i in range(8)}
parent.update({f"sw{j}": f"socket{j // 2}" for j in range(4)})


def path_up(node):
    out = []
    while node in parent:
        out.append(node)
        node = parent[node]
    return out, node


def route(a, b):
    """links (name, direction) from host a to host b through the tree"""
    _, top_a = path_up(a)
    ub, top_b = path_up(b)
    # climb until the paths meet
    anc_b = {n: i for i, n in enumerate(ub + [top_b])}
    links = []
    node = a
    while node not in anc_b and node in parent:
        links.append((f"l_{node}", "UP"))
        node = parent[node]
    if node not in anc_b:  # different sockets: node is this side's socket
        links.append(("qpi", "UP" if top_a < top_b else "DOWN"))
        node = top_b
    down = []
    n = b
    while n != node:
        down.append((f"l_{n}", "DOWN"))
        n = parent[n]
    return links + down[::-1]


lines = ["<?xml version='1.0'?>",
         '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">',
         "<!-- " + __doc__.replace("--", "-") + " -->",
         '<platform version="4.1">',
         '  <zone id="pcie8" routing="Full">']
for i in range(8):
    lines.append(f'    <host id="g{i}" speed="1Gf"/>')
for n in list(parent):
    lines.append(f'    <link id="l_{n}" bandwidth="{BW}" latency="{LAT}" sharing_policy="SPLITDUPLEX"/>')
lines.append(f'    <link id="qpi" bandwidth="{BW}" latency="{LAT}" sharing_policy="SPLITDUPLEX"/>')
for a in range(8):
    for b in range(8):
        if a == b:
            continue
        ctn = "".join(f'<link_ctn id="{l}" direction="{d}"/>' for l, d in route(f"g{a}", f"g{b}"))
        lines.append(f'    <route src="g{a}" dst="g{b}" symmetrical="NO">{ctn}</route>')
lines += ["  </zone>", "</platform>"]
print("\n".join(lines))
