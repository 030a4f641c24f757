" Vim compiler file for Tile: `:compiler tilec`, then `:make` checks the current file with
" `tilec check` and fills the quickfix list from its diagnostics, which look like
"     error[E0201]: cannot find `lod` in this scope
"      --> kernels/softmax.tile:12:13
" (the code and the message on the first line, the place on the second).
" `:make` with other arguments (`:make -D N=64 %`) keeps `tilec check` as the program.

if exists("current_compiler")
  finish
endif
let current_compiler = "tilec"

if exists(":CompilerSet") != 2
  command -nargs=* CompilerSet setlocal <args>
endif

let s:cpo_save = &cpo
set cpo&vim

CompilerSet makeprg=tilec\ check\ %:S
CompilerSet errorformat=
      \%-Gerror:\ aborting\ %.%#,
      \%E%trror%m,
      \%W%tarning%m,
      \%I%tote%m,
      \%Z\ %#-->\ %f:%l:%c,
      \%-G%.%#

let &cpo = s:cpo_save
unlet s:cpo_save
