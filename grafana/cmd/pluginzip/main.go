// Command pluginzip packs a built plugin (the frontend's dist/ folder with
// the backend executables beside it) into the zip Grafana installs: every
// file under one top folder named after the plugin id, executables kept
// executable. It refuses a dist/ that lacks what Grafana needs to load the
// plugin: plugin.json, module.js and the executable plugin.json names for
// at least one platform.
//
// Written with archive/zip rather than calling zip(1), which a machine
// with only Go does not have.
package main

import (
	"archive/zip"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	dist := flag.String("dist", "dist", "the built plugin folder")
	out := flag.String("out", "", "the zip to write")
	flag.Parse()
	if *out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: pluginzip -dist DIR -out FILE.zip")
		os.Exit(2)
	}
	if err := pack(*dist, *out); err != nil {
		fmt.Fprintln(os.Stderr, "pluginzip:", err)
		os.Exit(1)
	}
}

func pack(dist, out string) error {
	var meta struct {
		ID         string `json:"id"`
		Executable string `json:"executable"`
	}
	b, err := os.ReadFile(filepath.Join(dist, "plugin.json"))
	if err != nil {
		return fmt.Errorf("cannot read the plugin's plugin.json: %w", err)
	}
	if err := json.Unmarshal(b, &meta); err != nil || meta.ID == "" {
		return fmt.Errorf("cannot read the plugin id from %s/plugin.json: %v", dist, err)
	}
	if _, err := os.Stat(filepath.Join(dist, "module.js")); err != nil {
		return fmt.Errorf("no module.js in %s: build the frontend first (npm run build): %w", dist, err)
	}
	var files, exes []string
	err = filepath.WalkDir(dist, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dist, p)
		files = append(files, rel)
		if meta.Executable != "" && strings.HasPrefix(rel, meta.Executable+"_") {
			exes = append(exes, rel)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if meta.Executable != "" && len(exes) == 0 {
		return fmt.Errorf("no backend executable %s_<os>_<arch> in %s: build it first", meta.Executable, dist)
	}
	sort.Strings(files)
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	zw := zip.NewWriter(f)
	for _, rel := range files {
		if err := add(zw, filepath.Join(dist, rel), meta.ID+"/"+filepath.ToSlash(rel)); err != nil {
			f.Close()
			return err
		}
	}
	return errors.Join(zw.Close(), f.Close())
}

func add(zw *zip.Writer, src, name string) error {
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	h, err := zip.FileInfoHeader(st)
	if err != nil {
		return err
	}
	h.Name, h.Method = name, zip.Deflate
	w, err := zw.CreateHeader(h)
	if err != nil {
		return err
	}
	r, err := os.Open(src)
	if err != nil {
		return err
	}
	defer r.Close()
	_, err = io.Copy(w, r)
	return err
}
