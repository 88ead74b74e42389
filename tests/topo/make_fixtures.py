#!/usr/bin/env python3
"""Regenerates the hwloc XML fixtures the topology tests load.

Each machine is an hwloc synthetic topology (lstopo -i) with PCI network
devices added under the cache that holds a chosen NUMA node, which is how
hwloc records an I/O device's locality. Run from this directory.
"""
import re
import subprocess

# osdev_type values of hwloc's XML: 2 network interface, 3 OpenFabrics (RDMA), 5 co-processor.
MACHINES = {
    "two-socket-4numa-2nic.xml": ("pack:2 numa:2 l3:1 core:8 pu:2",
                                  {0: [("mlx5_0", 3, "0000:17:00.0"), ("ib0", 2, "0000:17:00.0")],
                                   2: [("mlx5_1", 3, "0000:a3:00.0"), ("ib1", 2, "0000:a3:00.0")]}),
    "eight-accel-4nic.xml": ("pack:2 numa:1 l3:1 core:16 pu:2",
                             {0: [("mlx5_0", 3, "0000:1a:00.0"), ("mlx5_1", 3, "0000:3c:00.0"),
                                  ("accel0", 5, "0000:1b:00.0"), ("accel1", 5, "0000:1c:00.0"),
                                  ("accel2", 5, "0000:3d:00.0"), ("accel3", 5, "0000:3e:00.0")],
                              1: [("mlx5_2", 3, "0000:9a:00.0"), ("mlx5_3", 3, "0000:bc:00.0"),
                                  ("accel4", 5, "0000:9b:00.0"), ("accel5", 5, "0000:9c:00.0"),
                                  ("accel6", 5, "0000:bd:00.0"), ("accel7", 5, "0000:be:00.0")]}),
    "one-core-vm.xml": ("pack:1 numa:1 core:1 pu:1", {0: [("eth0", 2, "0000:00:03.0")]}),
}


def devices(devs, gp):
    out = []
    for i, (name, kind, bus) in enumerate(devs):
        gp += 3
        out.append(f'<object type="Bridge" gp_index="{gp}" bridge_type="0-1" depth="0" bridge_pci="{bus[:4]}:[{bus[5:7]}-{bus[5:7]}]">'
                   f'<object type="PCIDev" gp_index="{gp + 1}" pci_busid="{bus}" pci_type="0200 [15b3:1017] [15b3:0007] 00" pci_link_speed="15.753846">'
                   f'<object type="OSDev" gp_index="{gp + 2}" name="{name}" osdev_type="{kind}"/></object></object>')
    return "".join(out), gp


for path, (synthetic, nics) in MACHINES.items():
    xml = subprocess.run(["lstopo-no-graphics", "-i", synthetic, "--of", "xml", "-"], check=True,
                         capture_output=True, text=True).stdout
    gp = 10000
    for numa, devs in nics.items():
        # Insert right after the NUMA node's own object (a memory child of its cache or package).
        m = re.search(rf'(<object type="NUMANode" os_index="{numa}"[^>]*>.*?</object>)', xml, re.S)
        text, gp = devices(devs, gp)
        xml = xml[:m.end()] + text + xml[m.end():]
    with open(path, "w") as f:
        f.write(xml)
    print("wrote", path)
