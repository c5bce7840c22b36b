#!/bin/bash
# exec-mds.sh ROOT STEP [ARGS…]: an operator's command for the exec driver
# (docs/actions.md "The exec driver"), over a toy MDS kept in files:
#   ROOT/dev/DEVICE/PATH          a component's bytes on a device
#   ROOT/meta/FILE.gen            the layout generation
#   ROOT/meta/FILE.unit           the stripe unit (bytes)
#   ROOT/meta/FILE.mM             mirror M: "DEVICE HANDLE BYTES PATH" a component
#   ROOT/meta/FILE.retired        components a restripe replaced: "DEVICE PATH"
#   ROOT/state/DEVICE             a device's state (state sets it, devices reports it)
#   ROOT/inflight/KEY.json        a move in flight (copy begun, not cleaned up or aborted):
#                                 its copy step's stdin, which holds in_flight; takeover
#                                 prints them
#   ROOT/epoch                    the highest leader epoch takeover was given (the fence:
#                                 a commit of a lower epoch is refused, exit 3)
#   ROOT/calls.log                every step called: "STEP MOVE"
#   ROOT/commits.log              every commit applied: "STEP MOVE"
#   ROOT/repeats.log              every commit asked again once applied: "STEP MOVE"
#   ROOT/locks/FILE               held by a step that reads or changes FILE (as an
#                                 MDS serialises its layout changes: a copy left
#                                 running by a killed mds finishes before the
#                                 next mds's steps on that file run)
#   ROOT/pace                     if present, copies are paced to BALLAST_RATE (and an
#                                 interrupted one goes on from its part file)
#   ROOT/interrupted.log          every copy stopped by SIGTERM: "MOVE"
#   ROOT/resumes.log              every paced copy that went on from a part file: "MOVE BLOCKS"
#   ROOT/fail.STEP                if present, the step exits with the code it holds
#   ROOT/lose.STEP                if present, the step is done but exits 1 (once)
# Moves take their values from argv (templates), restripes from BALLAST_*.
set -eu
root=$1 step=$2
shift 2
meta=$root/meta
echo "$step ${BALLAST_MOVE:-}" >>"$root/calls.log"
if [ -f "$root/fail.$step" ]; then
	echo "injected failure of $step" >&2
	exit "$(cat "$root/fail.$step")"
fi

write() { # write FILE: stdin to FILE atomically
	cat >"$1.tmp" && mv "$1.tmp" "$1"
}
devices() { # devices FILE MIRROR: the mirror's devices, comma-joined
	cut -d' ' -f1 "$meta/$1.m$2" | paste -sd,
}
unit_of() { # unit_of DEVICE PATH U: stripe unit U of a component on stdout
	dd if="$root/dev/$1/$2" bs="$unit" skip="$3" count=1 status=none
}
logical() { # logical FILE MIRROR-LINES-FILE TOTAL: the file's bytes through those components
	local -a dev=() path=()
	local w=0 d p
	while read -r d _ _ p; do dev[w]=$d path[w]=$p w=$((w + 1)); done <"$2"
	local n=$(((${3} + unit - 1) / unit)) u
	for ((u = 0; u < n; u++)); do
		unit_of "${dev[u % w]}" "${path[u % w]}" $((u / w)) || return 1
	done
}
total_of() { awk '{s += $3} END {print s + 0}' "$1"; }
inflight() { # inflight: ROOT/inflight/KEY.json of this move
	echo "$root/inflight/$(printf '%s' "$BALLAST_MOVE" | sha256sum | cut -c1-16).json"
}
record() { # record: keep this copy step's stdin (in_flight) while the move is in flight
	mkdir -p "$root/inflight"
	write "$(inflight)"
}
fenced() { # fenced: hold the fence (shared) and refuse an epoch below the highest seen
	exec 8>>"$root/fence.lock"
	flock -s 8
	local seen
	seen=$(cat "$root/epoch" 2>/dev/null || echo 0)
	if [ "${BALLAST_EPOCH:-0}" -lt "$seen" ]; then
		echo "epoch ${BALLAST_EPOCH:-0} is below $seen: a deposed leader" >&2
		exit 3
	fi
}
lock() { # lock FILE: hold FILE's lock until this step exits
	mkdir -p "$root/locks"
	exec 9>>"$root/locks/$1"
	flock 9
}
paced() { # paced SRC DST: cp, or 64 KiB at a time at BALLAST_RATE bytes/s with ROOT/pace,
	# going on from the whole blocks a DST left by an interrupted copy holds
	if ! [ -f "$root/pace" ] || [ "${BALLAST_RATE:-0}" -le 0 ]; then
		cp "$1" "$2"
		return
	fi
	local n=$((($(stat -c %s "$1") + 65535) / 65536)) i=0 nap
	nap=$(awk -v r="$BALLAST_RATE" 'BEGIN {printf "%.3f", 65536 / r}')
	[ -f "$2" ] && i=$(($(stat -c %s "$2") / 65536))
	truncate -s $((i * 65536)) "$2"
	[ "$i" -gt 0 ] && echo "$BALLAST_MOVE $i" >>"$root/resumes.log"
	for (( ; i < n; i++)); do
		dd if="$1" bs=65536 skip="$i" count=1 status=none >>"$2"
		sleep "$nap"
	done
}

case $step in
takeover)
	exec 8>>"$root/fence.lock"
	flock -x 8
	seen=$(cat "$root/epoch" 2>/dev/null || echo 0)
	[ "$BALLAST_EPOCH" -ge "$seen" ] || { echo "epoch $BALLAST_EPOCH is below $seen" >&2; exit 3; }
	echo "$BALLAST_EPOCH" | write "$root/epoch"
	for f in "$root"/inflight/*.json; do
		if [ -f "$f" ]; then cat "$f"; fi
	done
	;;
locate)
	file=$1
	[ -f "$meta/$file.gen" ] || { echo "no file $file" >&2; exit 4; }
	printf '{"file":"%s","generation":%s,"stripe_unit":%s,"mirrors":[' "$file" "$(cat "$meta/$file.gen")" "$(cat "$meta/$file.unit")"
	sep=
	for m in "$meta/$file".m*; do
		printf '%s[' "$sep"
		awk '{printf "%s{\"device\":\"%s\",\"handle\":\"%s\",\"bytes\":%s,\"path\":\"%s\"}", (NR > 1 ? "," : ""), $1, $2, $3, $4}' "$m"
		printf ']'
		sep=,
	done
	printf ']}\n'
	;;
stripes)
	dev=$1
	for m in "$meta"/*.m*; do
		[ -e "$m" ] || continue
		b=${m##*/} file=${b%.m*} mirror=${b##*.m}
		awk -v d="$dev" -v f="$file" -v mi="$mirror" '$1 == d {printf "{\"file\":\"%s\",\"mirror\":%d,\"component\":%d,\"handle\":\"%s\",\"bytes\":%s}\n", f, mi, NR - 1, $2, $3}' "$m"
	done
	;;
devices)
	for dir in "$root"/dev/*/; do
		dev=$(basename "$dir") used=0
		for f in "$dir"*; do [ -f "$f" ] && used=$((used + $(stat -c %s "$f"))); done
		state=
		[ -f "$root/state/$dev" ] && state=$(cat "$root/state/$dev")
		printf '{"device":"%s","state":"%s","used_bytes":%d}\n' "$dev" "$state" "$used"
	done
	;;
state)
	dev=$1 state=$3
	[ -n "$dev" ] || { echo "this MDS sets device states only" >&2; exit 5; }
	mkdir -p "$root/state"
	echo "$state" | write "$root/state/$dev"
	;;
copy | verify | commit | cleanup | abort)
	file=$1 mirror=$2 comp=$3 from=$4 to=$5 gen=$6
	lock "$file"
	line=$(sed -n "$((comp + 1))p" "$meta/$file.m$mirror")
	read -r cur handle bytes path <<<"$line"
	case $step in
	copy)
		# interrupted (SIGTERM: paused, cancelled, the mds stopping): the
		# part file is kept for the next copy to go on from; not done
		trap 'echo "$BALLAST_MOVE" >>"$root/interrupted.log"; echo "copy of $BALLAST_MOVE interrupted" >&2; exit 75' TERM
		[ "$cur" = "$from" ] && [ "$(cat "$meta/$file.gen")" = "$gen" ] || exit 3
		record
		mkdir -p "$root/dev/$to"
		[ -f "$root/dev/$to/$path" ] || { paced "$root/dev/$from/$path" "$root/dev/$to/$path.part" && mv "$root/dev/$to/$path.part" "$root/dev/$to/$path"; }
		;;
	verify)
		a=$(sha256sum <"$root/dev/$from/$path" | cut -d' ' -f1)
		b=missing
		[ -f "$root/dev/$to/$path" ] && b=$(sha256sum <"$root/dev/$to/$path" | cut -d' ' -f1)
		echo "sha256:$a"
		echo "sha256:$b"
		;;
	commit)
		fenced
		g=$(cat "$meta/$file.gen")
		if [ "$g" = "$((gen + 1))" ] && [ "$cur" = "$to" ]; then # applied before: once
			echo "commit $BALLAST_MOVE" >>"$root/repeats.log"
			exit 0
		fi
		[ "$g" = "$gen" ] && [ "$cur" = "$from" ] || exit 3
		awk -v c="$comp" -v t="$to" 'NR == c + 1 {$1 = t} {print}' "$meta/$file.m$mirror" | write "$meta/$file.m$mirror"
		echo $((gen + 1)) | write "$meta/$file.gen"
		echo "commit $BALLAST_MOVE" >>"$root/commits.log"
		;;
	cleanup)
		[ "$cur" = "$to" ] || exit 5
		rm -f "$root/dev/$from/$path" "$(inflight)"
		;;
	abort)
		[ "$cur" = "$to" ] && exit 5
		rm -f "$root/dev/$to/$path" "$root/dev/$to/$path.part" "$(inflight)"
		;;
	esac
	;;
restripe_*)
	file=$BALLAST_FILE mirror=$BALLAST_MIRROR gen=$BALLAST_GENERATION new=$BALLAST_NEW_GENERATION
	lock "$file"
	lines=$meta/$file.m$mirror unit=$(cat "$meta/$file.unit") g=$(cat "$meta/$file.gen")
	IFS=, read -r -a to <<<"$BALLAST_TO"
	w=${#to[@]}
	name() { echo "$file~g$new.$1"; }
	planned() { # the new mirror's lines, as the commit will write them
		local j
		for ((j = 0; j < w; j++)); do
			echo "${to[j]} $(printf '%02x%02x' "$new" "$j") $(stat -c %s "$root/dev/${to[j]}/$(name "$j")" 2>/dev/null || echo 0) $(name "$j")"
		done
	}
	case $step in
	restripe_copy)
		[ "$g" = "$gen" ] && [ "$(devices "$file" "$mirror")" = "$BALLAST_FROM" ] || exit 3
		record
		total=$(total_of "$lines")
		n=$(((total + unit - 1) / unit))
		for ((j = 0; j < w; j++)); do
			dst=$root/dev/${to[j]}/$(name "$j")
			[ -f "$dst" ] && continue # written before a crash: kept
			mkdir -p "${dst%/*}"
			: >"$dst.part"
			for ((u = j; u < n; u += w)); do
				c=$(sed -n "$((u % $(wc -l <"$lines") + 1))p" "$lines")
				read -r d _ _ p <<<"$c"
				unit_of "$d" "$p" $((u / $(wc -l <"$lines"))) >>"$dst.part"
			done
			mv "$dst.part" "$dst"
		done
		;;
	restripe_verify)
		total=$(total_of "$lines")
		a=$(logical "$file" "$lines" "$total" | sha256sum | cut -d' ' -f1)
		planned >"$root/planned.$$.tmp"
		b=$( (logical "$file" "$root/planned.$$.tmp" "$total" 2>/dev/null || echo missing) | sha256sum | cut -d' ' -f1)
		rm -f "$root/planned.$$.tmp"
		echo "sha256:$a"
		echo "sha256:$b"
		;;
	restripe_commit)
		fenced
		cur=$(devices "$file" "$mirror")
		if [ "$g" = "$new" ] && [ "$cur" = "$BALLAST_TO" ]; then # applied before: once
			echo "restripe_commit $BALLAST_MOVE" >>"$root/repeats.log"
			exit 0
		fi
		[ "$g" = "$gen" ] && [ "$cur" = "$BALLAST_FROM" ] || exit 3
		awk '{print $1, $4}' "$lines" | write "$meta/$file.retired"
		planned | write "$lines"
		echo "$new" | write "$meta/$file.gen"
		echo "restripe_commit $BALLAST_MOVE" >>"$root/commits.log"
		;;
	restripe_cleanup)
		[ "$(devices "$file" "$mirror")" = "$BALLAST_TO" ] || exit 5
		if [ -f "$meta/$file.retired" ]; then
			while read -r d p; do rm -f "$root/dev/$d/$p"; done <"$meta/$file.retired"
			rm -f "$meta/$file.retired"
		fi
		rm -f "$(inflight)"
		;;
	restripe_abort)
		[ "$(devices "$file" "$mirror")" = "$BALLAST_TO" ] && exit 5 # committed: nothing to abort
		for ((j = 0; j < w; j++)); do rm -f "$root/dev/${to[j]}/$(name "$j")" "$root/dev/${to[j]}/$(name "$j").part"; done
		rm -f "$(inflight)"
		;;
	esac
	;;
*)
	echo "unknown step $step" >&2
	exit 5
	;;
esac
if [ -f "$root/lose.$step" ]; then # done, but the answer is lost (once)
	rm -f "$root/lose.$step"
	echo "answer of $step lost" >&2
	exit 1
fi
