# zsh -f zsh-complete.zsh SCRIPT OUT LINE [fpath]: loads the completion SCRIPT into an interactive zsh
# on a pseudo-terminal (zsh/zpty) (sourced, or with `fpath` autoloaded as _awrepl from a directory on
# $fpath, as the README installs it), types LINE (as is: end it with a space for a new word) and a TAB, and
# writes the candidates zsh offered to OUT, one a line (compadd is wrapped to record them: the approach
# of zsh-capture-completion). TAB is bound to a widget that runs the completion and then writes an end
# marker, so the caller waits for the marker, not for a guess at how long completion takes.
zmodload zsh/zpty
local script=$1 out=$2 line=$3 how=${4:-source}
local marker=__awrepl_completion_done__
zpty z zsh -f -i
if [[ $how == fpath ]]; then
  local fdir=$out.fpath
  mkdir -p $fdir && cp $script $fdir/_awrepl
  zpty -w z "PROMPT='> '; fpath=(${(q)fdir} \$fpath); autoload -Uz compinit; compinit -u -D"
else
  zpty -w z "PROMPT='> '; autoload -Uz compinit; compinit -u -D"
fi
zpty -w z "zstyle ':completion:*' list-prompt ''; zstyle ':completion:*' select-prompt ''; unsetopt beep; setopt no_list_beep"
zpty -w z "compadd() {
  if [[ \${@[1,(i)(-|--)]} == *-(O|A|D)\\ * ]]; then builtin compadd \"\$@\"; return; fi
  local -a __hits; builtin compadd -A __hits \"\$@\"
  (( \$#__hits )) && print -rl -- \$__hits >> ${(q)out}
  builtin compadd \"\$@\"
}"
[[ $how == fpath ]] || zpty -w z "source ${(q)script}"
zpty -w z "_awrepl_test_tab() { zle complete-word; print -r -- $marker >> ${(q)out}; }; zle -N _awrepl_test_tab; bindkey '^I' _awrepl_test_tab"
: >$out
zpty -n -w z "$line"$'\t'
# Wait for the marker (10 s at most), then leave; the caller drops the marker line.
local i
for i in {1..100}; do
  grep -q $marker $out && break
  sleep 0.1
done
zpty -d z
grep -q $marker $out || { print -u2 "zsh-complete: no completion within 10 s"; exit 1 }
