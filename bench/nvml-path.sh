# bench/nvml-path.sh, sourced by gpu-check.sh and gpu-e2e.sh: nvml_path
# prints where the driver's libnvidia-ml.so.1 is (the linker cache lines)
# or, when the cache lacks it (containers that mount the driver, e.g. at
# /usr/local/nvidia), adds the usual driver folder that holds it to
# LD_LIBRARY_PATH and says so. go-nvml dlopen()s that name.
nvml_path() {
  if ldconfig -p 2>/dev/null | grep -i 'libnvidia-ml\.so\.1'; then
    return 0
  fi
  local d
  for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib64/nvidia /usr/lib/nvidia; do
    if [ -e "$d/libnvidia-ml.so.1" ]; then
      export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      echo "libnvidia-ml.so.1 not in the linker cache; found in $d, added to LD_LIBRARY_PATH"
      return 0
    fi
  done
  echo "libnvidia-ml.so.1 neither in the linker cache nor in the usual driver folders (LD_LIBRARY_PATH may still provide it)"
}
