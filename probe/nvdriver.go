package probe

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/hashicorp/go-version"

	"github.com/smpatch/smpatch/internal/lazyre"
)

// ParseParams reads /proc/driver/nvidia/params: one "Key: value" a line.
// A line that is not one is returned in bad (at most a few, clipped).
func ParseParams(data []byte) (params map[string]string, bad []string) {
	params = map[string]string{}
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsAny(k, " \t\"") {
			if len(bad) < 3 {
				bad = append(bad, fmt.Sprintf("line %d: %q", i+1, clip(line, 60)))
			}
			continue
		}
		params[k] = strings.TrimSpace(v)
	}
	return params, bad
}

// ParseRegistryDwords reads the value of the RegistryDwords parameter:
// "Key=Value;Key=Value", quoted or not, "" when none are set. An entry
// that is not Key=Value is returned in bad.
func ParseRegistryDwords(s string) (dwords map[string]string, bad []string) {
	dwords = map[string]string{}
	for _, e := range strings.Split(unquote(s), ";") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		k, v, ok := strings.Cut(e, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" || strings.ContainsAny(k, " \t") {
			if len(bad) < 3 {
				bad = append(bad, clip(e, 60))
			}
			continue
		}
		dwords[k] = v
	}
	return dwords, bad
}

// ParseRegistryDwordsPerDevice reads RegistryDwordsPerDevice:
// "pci=ADDR;Key=Value;...;pci=ADDR2;Key=Value", each "pci=" starting the
// entries of the device it names. Entries before the first "pci=", or not
// Key=Value, are returned in bad.
func ParseRegistryDwordsPerDevice(s string) (per map[string]map[string]string, bad []string) {
	per = map[string]map[string]string{}
	var cur map[string]string
	for _, e := range strings.Split(unquote(s), ";") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		k, v, ok := strings.Cut(e, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch {
		case ok && k == "pci" && v != "":
			if per[v] == nil {
				per[v] = map[string]string{}
			}
			cur = per[v]
		case ok && k != "" && !strings.ContainsAny(k, " \t") && cur != nil:
			cur[k] = v
		default:
			if len(bad) < 3 {
				bad = append(bad, clip(e, 60))
			}
		}
	}
	return per, bad
}

func unquote(s string) string {
	s = strings.TrimSpace(s)
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return s[1 : len(s)-1]
	}
	return s
}

var procVersionLineRe = lazyre.New(`Kernel Module(?:\s+for\s+\S+)?\s+(\d+\.\d+(?:\.\d+)*)`)

// ParseDriverVersion reads the first line of /proc/driver/nvidia/version
// ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04
// Release Build ..."; the proprietary module's says "x86_64 Kernel Module
// 535.104.05"): the version, and "open" or "proprietary".
func ParseDriverVersion(data []byte) (line, ver, module string, err error) {
	line, _, _ = strings.Cut(string(data), "\n")
	line = strings.TrimSpace(line)
	m := procVersionLineRe().FindStringSubmatch(line)
	if m == nil {
		return line, "", "", fmt.Errorf("no Kernel Module version in %q", clip(line, 80))
	}
	if _, err := version.NewVersion(m[1]); err != nil {
		return line, "", "", fmt.Errorf("driver version %q is not a version", clip(m[1], 40))
	}
	module = "proprietary"
	if strings.Contains(line, "Open Kernel Module") {
		module = "open"
	}
	return line, m[1], module, nil
}

// readNvidiaDriver reads /proc/driver/nvidia/version and params.
func readNvidiaDriver(proc *hostTree, r *Report) *NvidiaDriver {
	if _, err := proc.readDir("driver/nvidia"); isNotExist(err) {
		r.unknown("host.nvidia_driver", proc.show("driver/nvidia")+": absent (no nvidia kernel module loaded)")
		return nil
	}
	d := &NvidiaDriver{RegistryDwords: map[string]string{}}
	read := false
	vf := "driver/nvidia/version"
	if data, err := proc.read(vf, maxProcFile); err != nil {
		r.unknown("host.nvidia_driver.version", err.Error())
	} else if line, v, mod, err := ParseDriverVersion(data); err != nil {
		r.unknown("host.nvidia_driver.version", proc.show(vf)+": "+err.Error())
	} else {
		d.VersionLine, d.Version, d.Module, d.VersionFrom = line, v, mod, proc.show(vf)
		read = true
	}
	pf := "driver/nvidia/params"
	data, err := proc.read(pf, maxProcFile)
	if err != nil {
		r.unknown("host.nvidia_driver.params", err.Error())
	} else {
		params, bad := ParseParams(data)
		if len(bad) > 0 {
			r.unknown("host.nvidia_driver.params", fmt.Sprintf("%s: not Key: value: %s", proc.show(pf), strings.Join(bad, ", ")))
		}
		d.Params, d.ParamsFrom = params, proc.show(pf)
		read = true
		if v, ok := params["RegistryDwords"]; ok {
			dw, bad := ParseRegistryDwords(v)
			d.RegistryDwords = dw
			if len(bad) > 0 {
				r.unknown("host.nvidia_driver.registry_dwords", fmt.Sprintf("%s: RegistryDwords entries not Key=Value: %s", proc.show(pf), strings.Join(bad, ", ")))
			}
		}
		if v, ok := params["RegistryDwordsPerDevice"]; ok {
			per, bad := ParseRegistryDwordsPerDevice(v)
			if len(per) > 0 {
				d.RegistryDwordsPerDevice = per
			}
			if len(bad) > 0 {
				r.unknown("host.nvidia_driver.registry_dwords_per_device", fmt.Sprintf("%s: RegistryDwordsPerDevice entries not read: %s", proc.show(pf), strings.Join(bad, ", ")))
			}
		}
	}
	if !read {
		return nil
	}
	return d
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
