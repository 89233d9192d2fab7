# bash completion for spanring(1); `meson install` puts it in
# share/bash-completion/completions/spanring, where bash-completion loads it on first use.
#
# The commands, their options and the values of --format/--to are read from the program's own
# `--help` (CLI11's layout: "  -o,--output TEXT", "--to TEXT:{strace,chrome}", the
# "Subcommands:" list), so an option added to cli/ completes without editing this
# file. One `spanring ... --help` per Tab press. After `run ... --` the traced command is
# completed as a command line of its own.

# The option names and subcommands in `"$1" [CMD] --help`, one per line.
_spanring_help_words() {
  "$@" --help 2>/dev/null | awk '
    /^Subcommands:/ { sub_ = 1; next }
    /^[^ ]/ { sub_ = 0 }
    sub_ && /^  [a-z]/ { print $1; next }
    /^  -/ {
      n = split($1, names, ",")
      for (i = 1; i <= n; i++) print names[i]
    }'
}

# The values listed for option $2 in `"$1" [CMD] --help` ("--format TEXT:{strace,binary}").
_spanring_option_values() {
  local opt=${*: -1}
  "${@:1:$#-1}" --help 2>/dev/null | awk -v opt="$opt" '
    /^  -/ {
      n = split($1, names, ",")
      for (i = 1; i <= n; i++)
        if (names[i] == opt && match($0, /\{[^}]*\}/)) {
          v = substr($0, RSTART + 1, RLENGTH - 2)
          gsub(",", "\n", v)
          print v
        }
    }'
}

_spanring() {
  local cur=${COMP_WORDS[COMP_CWORD]}
  local prev=${COMP_WORDS[COMP_CWORD - 1]}
  local prog=${COMP_WORDS[0]}
  local cmd="" i
  for ((i = 1; i < COMP_CWORD; i++)); do
    local w=${COMP_WORDS[i]}
    if [[ $w == -- && -n $cmd ]]; then
      # `spanring run [OPTIONS] -- CMD ...`: complete CMD's own command line.
      if declare -F _command_offset >/dev/null; then
        _command_offset $((i + 1))
      elif ((COMP_CWORD == i + 1)) && [[ $cur != */* ]]; then
        COMPREPLY=($(compgen -c -- "$cur"))
      else
        COMPREPLY=($(compgen -f -- "$cur"))
      fi
      return 0
    fi
    if [[ -z $cmd && $w != -* ]]; then cmd=$w; fi
  done

  if [[ -z $cmd ]]; then
    COMPREPLY=($(compgen -W "$(_spanring_help_words "$prog")" -- "$cur"))
    return 0
  fi

  case $prev in
    -o | --output | --also-strace)
      COMPREPLY=($(compgen -f -- "$cur"))
      return 0
      ;;
    --segment)
      COMPREPLY=($(compgen -W "$(cd /dev/shm 2>/dev/null && compgen -G 'spanring-*')" -- "$cur"))
      return 0
      ;;
    --*)
      local values
      values=$(_spanring_option_values "$prog" "$cmd" "$prev")
      if [[ -n $values ]]; then
        COMPREPLY=($(compgen -W "$values" -- "$cur"))
        return 0
      fi
      ;;
  esac

  if [[ $cur == -* || $cmd == run || $cmd == drain || $cmd == clean ]]; then
    COMPREPLY=($(compgen -W "$(_spanring_help_words "$prog" "$cmd")" -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur"))  # convert, report: the trace file
  fi
  return 0
}
complete -F _spanring spanring
