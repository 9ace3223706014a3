#!/usr/bin/env bash
# Writes the /sys and /proc the probe reads of the story's host into
# ROOT/sys and ROOT/proc: eight RTX PRO 6000 Blackwell Server Edition GPUs
# (10de:2bb5) on a two-socket AMD host, each on its own root port (direct
# attach), two root ports per root complex, GPUs 0-3 on NUMA node 0 /
# socket 0 and 4-7 on node 1 / socket 1, BAR1 128 GiB, every link
# Gen5 x16.
#
#   acs  (the story's host as it was): ACS enabled on every root port
#        (Source Validation, P2P Request and Completion Redirect, Upstream
#        Forwarding: control 0x001d), the IOMMU translating DMA
#        (amd_iommu=on, group type DMA-FQ), no RegistryDwords;
#   p2p  (the same host set up for peer traffic): ACS capabilities present
#        with nothing enabled, the IOMMU in passthrough (iommu=pt, group
#        type identity), RegistryDwords ForceP2P=0x11;RMForceP2PType=1.
#
# The GPUs' UUIDs are GPU-0000000N-5a1e-4b0c-9d6e-00000000000N, as the
# scripted nvidia-smi of make-reports.sh prints them. Point the probe at
# the tree with SMPATCH_SYSFS=ROOT/sys SMPATCH_PROCFS=ROOT/proc.
#
# usage: examples/hosts/synthetic-host.sh ROOT [acs|p2p]
set -euo pipefail
root=$1
shape=${2:-acs}
case "$shape" in acs | p2p) ;; *) echo "synthetic-host.sh: shape $shape: want acs or p2p" >&2; exit 2 ;; esac
sys=$root/sys proc=$root/proc
mkdir -p "$sys/bus/pci/devices" "$sys/class/iommu" "$sys/kernel/iommu_groups" "$proc/driver/nvidia/gpus"

w() { mkdir -p "$(dirname "$1")"; printf '%s\n' "$2" >"$1"; }
# put FILE OFFSET OCTAL: bytes into a binary file at a decimal offset.
put() { printf "$3" | dd of="$1" bs=1 seek="$2" conv=notrunc 2>/dev/null; }

if [ "$shape" = acs ]; then
  acsctl='\035\000' group=DMA-FQ iommu="amd_iommu=on" dwords='""'
else
  acsctl='\000\000' group=identity iommu="amd_iommu=on iommu=pt" dwords='"ForceP2P=0x11;RMForceP2PType=1"'
fi
for n in 0 1 2 3; do mkdir -p "$sys/class/iommu/ivhd$n"; done
for g in $(seq 0 11); do mkdir -p "$sys/kernel/iommu_groups/$g"; done

i=0
for rc in 10 30 90 b0; do
  for k in 0 1; do
    port=$([ $k = 0 ] && echo 01.1 || echo 03.1)
    bus=$(printf '%02x' $((0x$rc + 1 + k)))
    rp=0000:$rc:$port gpu=0000:$bus:00.0
    node=$((i / 4))
    rpd=$sys/devices/pci0000:$rc/$rp gd=$rpd/$gpu
    w "$rpd/vendor" 0x1022; w "$rpd/device" 0x14ab; w "$rpd/class" 0x060400
    # Root port config space: PCIe capability at 0x50 (root port), AER at
    # 0x100, ACS at 0x150 with the shape's control register.
    dd if=/dev/zero of="$rpd/config" bs=4096 count=1 2>/dev/null
    put "$rpd/config" 0 '\042\020\253\024\007\004\020\000'
    put "$rpd/config" 52 '\120'
    put "$rpd/config" 80 '\020\130\102\001'
    put "$rpd/config" 256 '\001\000\001\025'
    put "$rpd/config" 336 "\\015\\000\\001\\000\\137\\000$acsctl"
    ln -sfn "../../../devices/pci0000:$rc/$rp" "$sys/bus/pci/devices/$rp"
    w "$gd/vendor" 0x10de; w "$gd/device" 0x2bb5; w "$gd/class" 0x030200
    w "$gd/current_link_speed" "32.0 GT/s PCIe"; w "$gd/max_link_speed" "32.0 GT/s PCIe"
    w "$gd/current_link_width" 16; w "$gd/max_link_width" 16
    w "$gd/numa_node" $node
    w "$gd/local_cpulist" "$([ $node = 0 ] && echo 0-63,128-191 || echo 64-127,192-255)"
    # BAR 0 (64 MiB, 32-bit), BAR1 (128 GiB, 64-bit: two lines), BAR 3
    # (32 MiB, 64-bit), the I/O BAR.
    {
      r() { printf '0x%016x 0x%016x 0x%016x\n' "$1" "$(($1 + $2 - 1))" "$3"; }
      r $((0xe0000000 + i * 0x4000000)) $((64 << 20)) 0x40200
      r $((0x18000000000 + i * 0x2000000000)) $((128 << 30)) 0x14220c
      echo '0x0000000000000000 0x0000000000000000 0x0000000000000000'
      r $((0x1a0000000 + i * 0x2000000)) $((32 << 20)) 0x14220c
      echo '0x0000000000000000 0x0000000000000000 0x0000000000000000'
      r $((0xe000 + i * 0x100)) 128 0x40101
    } >"$gd/resource"
    grp=$((20 + i))
    w "$sys/kernel/iommu_groups/$grp/type" $group
    ln -sfn "../../../../kernel/iommu_groups/$grp" "$gd/iommu_group"
    ln -sfn "../../../devices/pci0000:$rc/$rp/$gpu" "$sys/bus/pci/devices/$gpu"
    w "$proc/driver/nvidia/gpus/$gpu/information" "$(printf 'Model: \t\t NVIDIA RTX PRO 6000 Blackwell Server Edition\nGPU UUID: \t GPU-0000000%d-5a1e-4b0c-9d6e-00000000000%d\nBus Location: \t %s\nDevice Minor: \t %d' $i $i $gpu $i)"
    i=$((i + 1))
  done
done
w "$sys/devices/system/cpu/cpu0/topology/physical_package_id" 0
w "$sys/devices/system/cpu/cpu64/topology/physical_package_id" 1
w "$proc/cmdline" "BOOT_IMAGE=/boot/vmlinuz-6.8.0-60-generic root=UUID=0e0b6c2e ro quiet $iommu"
w "$proc/driver/nvidia/version" "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build  (dvs-builder@U22-I3-AE18-09-1)  Wed Jul  9 22:04:25 UTC 2025"
printf 'EnableResizableBar: 1\nNvLinkDisable: 0\nDmaRemapPeerMmio: 1\nGrdmaPciTopoCheckOverride: 0\nRegistryDwords: %s\nRegistryDwordsPerDevice: ""\n' "$dwords" >"$proc/driver/nvidia/params"
