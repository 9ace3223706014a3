package probe

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// A PCI configuration space, as the binary config file of a device's /sys
// directory holds it: 64 bytes for anyone, 256 (conventional) or 4096
// (PCI Express) bytes for root. Capabilities are linked lists: the
// conventional ones from the pointer at 0x34, within the first 256 bytes;
// the extended ones from 0x100, each header a dword of ID (bits 15:0),
// version (19:16) and the next offset (31:20), 0 at the end.

const (
	cfgExtStart = 0x100
	cfgExtEnd   = 0x1000
	// ExtCapACS is the ID of the Access Control Services extended capability.
	ExtCapACS = 0x000D
	capPCIe   = 0x10
)

// ErrConfigShort is wrapped by the error for a config space too short to
// hold what was looked for (the extended capabilities need root).
var ErrConfigShort = errors.New("config space not readable that far")

// FindExtCap walks the extended capability list of cfg from 0x100 and
// returns the offset of the first capability with the given ID, or 0 when
// the list ends without one. The walk is bounded: a next pointer that goes
// below 0x100, past the end or backwards into a visited header, or a list
// longer than the space holds, is an error naming the offset.
func FindExtCap(cfg []byte, id uint16) (int, error) {
	if len(cfg) < cfgExtStart+4 {
		return 0, fmt.Errorf("%w: %d bytes, the extended capabilities start at 0x100", ErrConfigShort, len(cfg))
	}
	end := min(len(cfg), cfgExtEnd)
	off := cfgExtStart
	seen := map[int]bool{}
	for steps := 0; ; steps++ {
		if steps > (cfgExtEnd-cfgExtStart)/4 {
			return 0, fmt.Errorf("extended capability list longer than the config space")
		}
		if off+4 > end {
			return 0, fmt.Errorf("extended capability at 0x%x: past the %d bytes of config space", off, len(cfg))
		}
		seen[off] = true
		h := binary.LittleEndian.Uint32(cfg[off:])
		if off == cfgExtStart && (h == 0 || h == 0xffffffff) {
			return 0, nil // no extended capabilities
		}
		if uint16(h) == id {
			return off, nil
		}
		next := int(h >> 20)
		if next == 0 {
			return 0, nil
		}
		switch {
		case next < cfgExtStart:
			return 0, fmt.Errorf("extended capability at 0x%x: next pointer 0x%x below 0x100", off, next)
		case next&3 != 0:
			return 0, fmt.Errorf("extended capability at 0x%x: next pointer 0x%x not dword-aligned", off, next)
		case seen[next]:
			return 0, fmt.Errorf("extended capability at 0x%x: next pointer 0x%x loops", off, next)
		}
		off = next
	}
}

// FindCap walks the conventional capability list of cfg (from the pointer
// at 0x34, when the status register says there is one) and returns the
// offset of the capability with the given ID, or 0 when there is none;
// bounded like FindExtCap.
func FindCap(cfg []byte, id byte) (int, error) {
	if len(cfg) < 0x40 {
		return 0, fmt.Errorf("%w: %d bytes, the header alone is 64", ErrConfigShort, len(cfg))
	}
	if cfg[6]&0x10 == 0 { // status: capabilities list
		return 0, nil
	}
	off := int(cfg[0x34] &^ 3)
	seen := map[int]bool{}
	for steps := 0; off != 0; steps++ {
		switch {
		case steps > 48:
			return 0, fmt.Errorf("capability list longer than the config space")
		case off < 0x40:
			return 0, fmt.Errorf("capability pointer 0x%x inside the header", off)
		case off+2 > len(cfg):
			return 0, fmt.Errorf("%w: capability at 0x%x, %d bytes read", ErrConfigShort, off, len(cfg))
		case seen[off]:
			return 0, fmt.Errorf("capability pointer 0x%x loops", off)
		}
		seen[off] = true
		if cfg[off] == id {
			return off, nil
		}
		off = int(cfg[off+1] &^ 3)
	}
	return 0, nil
}

// pciePortTypes name the device/port type field of the PCI Express
// capabilities register.
var pciePortTypes = map[int]string{
	0: "endpoint", 1: "legacy endpoint", 4: "root port", 5: "switch upstream port",
	6: "switch downstream port", 7: "PCIe to PCI bridge", 8: "PCI to PCIe bridge",
	9: "root complex integrated endpoint", 10: "root complex event collector",
}

// PCIePortType is the port type the PCI Express capability of cfg states
// ("root port", "switch downstream port"), or "" when cfg has none.
func PCIePortType(cfg []byte) (string, error) {
	off, err := FindCap(cfg, capPCIe)
	if err != nil || off == 0 {
		return "", err
	}
	if off+4 > len(cfg) {
		return "", fmt.Errorf("%w: PCI Express capability at 0x%x, %d bytes read", ErrConfigShort, off, len(cfg))
	}
	t := int(cfg[off+2]>>4) & 0xf
	if s, ok := pciePortTypes[t]; ok {
		return s, nil
	}
	return fmt.Sprintf("port type %d", t), nil
}

// acsBits name the ACS control bits, bit 0 first.
var acsBits = []string{
	"source_validation", "translation_blocking", "p2p_request_redirect",
	"p2p_completion_redirect", "upstream_forwarding", "p2p_egress_control",
	"direct_translated_p2p",
}

// ReadACS reads the ACS capability of cfg: Present false when the whole
// extended list was read without one; an error when the list cannot be
// read (too short: not root) or is malformed.
func ReadACS(cfg []byte) (*ACS, error) {
	off, err := FindExtCap(cfg, ExtCapACS)
	if err != nil {
		return nil, err
	}
	if off == 0 {
		return &ACS{Enabled: []string{}}, nil
	}
	if off+8 > len(cfg) {
		return nil, fmt.Errorf("ACS capability at 0x%x: past the %d bytes of config space", off, len(cfg))
	}
	a := &ACS{
		Present:    true,
		Offset:     off,
		Capability: binary.LittleEndian.Uint16(cfg[off+4:]),
		Control:    binary.LittleEndian.Uint16(cfg[off+6:]),
		Enabled:    []string{},
	}
	for i, name := range acsBits {
		if a.Control&(1<<i) != 0 {
			a.Enabled = append(a.Enabled, name)
		}
	}
	a.RedirectsP2P = a.Control&(1<<2|1<<3) != 0
	return a, nil
}
