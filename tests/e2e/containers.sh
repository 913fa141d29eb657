# shellcheck shell=bash
# The job's IMEX channel inside pyxis/enroot containers (E2E_PHASE=containers,
# sourced by run.sh). Runs in a Slurm rootfs that tests/e2e/containers-build.sh
# filled with NVIDIA's enroot 4.1.2 and pyxis 0.24.0, entered with pivot_root
# (IN_ROOTFS_PIVOT=1: enroot needs user namespaces, which a chroot is refused).
# Every task runs /report in a squashfs image of busybox: one CNODE= line of
# what the container sees. pyxis is registered next to slurm-imex in
# plugstack.conf, in either order; enroot's configuration is a copy of the
# installed one bound over /usr/local/etc/enroot for this run only.

ENROOT_ETC=/usr/local/etc/enroot
PYXIS_SO=/usr/local/lib/slurm/spank_pyxis.so
IMAGE=$C/busybox.sqsh
# What a site copies from conf-examples/ to bring the channel back when enroot
# builds a restricted /dev.
SHIPPED_FSTAB=$REPO/conf-examples/enroot/mounts.d/90-slurm-imex.fstab

# Before cluster_up, so every node's mount namespace inherits the binds.
containers_setup() {
  local tool
  for tool in /usr/local/bin/enroot "$PYXIS_SO" /bin/busybox /usr/bin/mksquashfs; do
    [ -e "$tool" ] || { echo "e2e containers: $tool missing: run tests/e2e/containers-build.sh on this rootfs" >&2; return 1; }
  done
  rm -rf "$C/etc-enroot" "$C/image"
  cp -a "$ENROOT_ETC" "$C/etc-enroot"
  mount --bind "$C/etc-enroot" "$ENROOT_ETC"
  # Per-user paths under the node's own /run/enroot (cluster.sh binds one per node).
  cat > "$C/etc-enroot/enroot.conf.d/50-e2e-paths.conf" <<'CONF'
ENROOT_RUNTIME_PATH /run/enroot/runtime-$(id -u)
ENROOT_DATA_PATH    /run/enroot/data-$(id -u)
ENROOT_CACHE_PATH   /run/enroot/cache-$(id -u)
ENROOT_TEMP_PATH    /run/enroot/tmp-$(id -u)
CONF
  container_image
}

# A squashfs of busybox with /report: the container's view, one line.
container_image() {
  local img=$C/image applet
  mkdir -p "$img"/{bin,etc,dev,proc,sys,tmp,run,var}
  cp /bin/busybox "$img/bin/busybox"
  for applet in sh ls stat tr id hostname sed cat; do ln -s busybox "$img/bin/$applet"; done
  echo "root:x:0:0:root:/root:/bin/sh" > "$img/etc/passwd"
  echo "root:x:0:" > "$img/etc/group"
  echo "slurm-imex e2e image" > "$img/etc/e2e-image"
  # OPEN is what opening each channel for writing says: the test devices
  # have no driver, so reaching the device gives "No such device or
  # address", while a mount that forbids it would say otherwise.
  cat > "$img/report" <<'REPORT'
#!/bin/sh
d=/dev/nvidia-caps-imex-channels
if [ -d $d ]; then ls="$(ls -A $d | tr '\n' ' ')"; else ls=absent; fi
stat="$(stat -c '%F:%t:%u:%a' $d/* 2>/dev/null | tr '\n' ' ')"
open=""
for f in $d/*; do [ -e "$f" ] && open="$open$( (: > "$f") 2>&1 | sed 's/.*: //')"; done
[ -e /etc/e2e-image ] && image=yes || image=no
[ -e /dev/fuse ] && fuse=yes || fuse=no
echo "CNODE=$(hostname) IMAGE=$image UID=$(id -u) CH=${SLURM_IMEX_CHANNEL:-none} NV=${NVIDIA_IMEX_CHANNELS:-none} LS=[$ls] STAT=[$stat] OPEN=[$open] HOSTDEV=$fuse"
REPORT
  chmod 755 "$img/report"
  mksquashfs "$img" "$IMAGE" -noappend -quiet -no-progress >/dev/null || { echo "e2e containers: mksquashfs failed" >&2; return 1; }
  chmod 644 "$IMAGE"
}

# plugstack.conf with slurm-imex's line and pyxis's, in the order given.
register_pyxis() { # imex-first | pyxis-first
  local f=$C/etc-slurm/plugstack.conf imex
  imex=$(grep -v spank_pyxis "$f")
  if [ "$1" = imex-first ]; then printf '%s\nrequired %s\n' "$imex" "$PYXIS_SO" > "$f"
  else printf 'required %s\n%s\n' "$PYXIS_SO" "$imex" > "$f"; fi
}

set_restricted_dev() { # yes | no
  local f=$C/etc-enroot/enroot.conf.d/60-e2e-restrict-dev.conf
  if [ "$1" = yes ]; then echo "ENROOT_RESTRICT_DEV y" > "$f"; else rm -f "$f"; fi
}
set_shipped_fstab() { # yes | no
  local f; f=$C/etc-enroot/mounts.d/$(basename "$SHIPPED_FSTAB")
  if [ "$1" = yes ]; then install -m 644 "$SHIPPED_FSTAB" "$f"; else rm -f "$f"; fi
}

# A 2-node job whose one step runs /report in the image; prints its CNODE lines.
container_job() { # sbatch-args...
  local id out
  id=$(submit -N2 "$@" "srun -N2 --ntasks-per-node=1 --container-image=$IMAGE /report") || { fail "sbatch failed"; return 1; }
  expect_eq "$(wait_done "$id" 90)" COMPLETED "job $id final state"
  out=$(cat "$C/out/$id.out" "$C/out/$id.err" 2>/dev/null)
  expect_eq "$(grep -c '^CNODE=.* IMAGE=yes ' <<<"$out")" 2 "one report per node from inside the image: $out"
  echo "JOB=$id"
  grep '^CNODE=' <<<"$out"
}

# Inside each node's container: the job's channel only, owned by the user,
# 0600, usable, and both variables.
expect_job_channel_in_containers() { # job-output
  local out=$1 id ch uid major i line
  id=$(sed -n 's/^JOB=//p' <<<"$out"); ch=$(channel_for "$id")
  uid=$(id -u "$TEST_USER"); major=$(printf '%x' "$CHANNEL_MAJOR")
  for i in 1 2; do
    line=$(grep "^CNODE=n$i " <<<"$out")
    expect_contains "$line" "UID=$uid CH=$ch NV=$ch " "n$i: the user's container has SLURM_IMEX_CHANNEL and NVIDIA_IMEX_CHANNELS"
    expect_contains "$line" "LS=[channel$ch ]" "n$i: the container sees only channel$ch"
    expect_contains "$line" "STAT=[character special file:$major:$uid:600 ]" "n$i: the channel device, the user's, 0600"
    expect_contains "$line" "OPEN=[No such device or address]" "n$i: the channel can be opened for writing (the test device has no driver)"
  done
}

expect_no_channel_in_containers() { # job-output
  local out=$1 i line
  for i in 1 2; do
    line=$(grep "^CNODE=n$i " <<<"$out")
    expect_contains "$line" "CH=none NV=none LS=[] STAT=[] " "n$i: a plain job's container sees an empty channel directory and no variable"
  done
}

test_container_sees_only_its_channel_with_enroots_default_dev() {
  set_restricted_dev no; set_shipped_fstab no; register_pyxis imex-first
  local out; out=$(container_job --imex) || return
  expect_job_channel_in_containers "$out"
  expect_contains "$out" "HOSTDEV=yes" "enroot's default /dev is the node's"
  out=$(container_job) || return
  expect_no_channel_in_containers "$out"
}

test_plugin_order_does_not_matter() {
  set_restricted_dev no; set_shipped_fstab no; register_pyxis pyxis-first
  local out; out=$(container_job --imex) || return
  expect_job_channel_in_containers "$out"
  out=$(container_job) || return
  expect_no_channel_in_containers "$out"
  register_pyxis imex-first
}

# What a site sees without the shipped line: the variable names a channel
# the container does not have.
test_restricted_dev_loses_the_channel_without_the_shipped_fstab() {
  set_restricted_dev yes; set_shipped_fstab no; register_pyxis imex-first
  local out id ch i; out=$(container_job --imex) || return
  id=$(sed -n 's/^JOB=//p' <<<"$out"); ch=$(channel_for "$id")
  for i in 1 2; do
    local line; line=$(grep "^CNODE=n$i " <<<"$out")
    expect_contains "$line" "NV=$ch LS=[absent]" "n$i: restricted /dev has no channel directory, NVIDIA_IMEX_CHANNELS still set"
    expect_contains "$line" "HOSTDEV=no" "n$i: enroot built a fresh /dev"
  done
  set_restricted_dev no
}

test_restricted_dev_with_the_shipped_fstab_gives_back_exactly_the_channel() {
  set_restricted_dev yes; set_shipped_fstab yes; register_pyxis imex-first
  local out; out=$(container_job --imex) || return
  expect_job_channel_in_containers "$out"
  expect_eq "$(grep -c 'HOSTDEV=no' <<<"$out")" 2 "enroot built a fresh /dev on both nodes"
  out=$(container_job) || return
  expect_no_channel_in_containers "$out"
  # The node's own channel0 (mode 666 on the node) stays hidden here too.
  expect_not_contains "$out" "channel0" "the node's channel0 never reaches a container"
  set_restricted_dev no; set_shipped_fstab no
}
