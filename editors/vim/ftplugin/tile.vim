" Vim filetype plugin for Tile (block/tile GPU language).
if exists("b:did_ftplugin")
  finish
endif
let b:did_ftplugin = 1

let s:cpo_save = &cpo
set cpo&vim

setlocal commentstring=//\ %s
setlocal comments=s1:/*,mb:*,ex:*/,://
setlocal formatoptions-=t formatoptions+=croql
setlocal iskeyword=@,48-57,_,192-255
setlocal expandtab shiftwidth=4 softtabstop=4 tabstop=4
setlocal suffixesadd=.tile
setlocal include=^\\s*\\%(import\\\|from\\)\\s\\+
setlocal includeexpr=substitute(v:fname,'\\.','/','g')
setlocal matchpairs=(:),{:},[:]

let b:undo_ftplugin = "setlocal commentstring< comments< formatoptions< iskeyword<"
      \ . " expandtab< shiftwidth< softtabstop< tabstop< suffixesadd< include<"
      \ . " includeexpr< matchpairs<"

let &cpo = s:cpo_save
unlet s:cpo_save
