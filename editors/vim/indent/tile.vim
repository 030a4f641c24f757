" Vim indent file for Tile (block/tile GPU language).
"
" A line is indented from the innermost bracket that is still open before it:
"   * after `{` (or a `(`/`[` that ends its line): the indent of the statement holding the
"     bracket plus 'shiftwidth';
"   * after a `(`/`[` followed by text on its line: aligned just after the bracket;
"   * a line starting with the matching closer: the indent of that statement.
" Brackets inside comments and strings are ignored.
if exists("b:did_indent")
  finish
endif
let b:did_indent = 1

setlocal autoindent nosmartindent nocindent
setlocal indentexpr=GetTileIndent(v:lnum)
setlocal indentkeys=0{,0},0),0],!^F,o,O,e

let b:undo_indent = "setlocal autoindent< smartindent< cindent< indentexpr< indentkeys<"

if exists("*GetTileIndent")
  finish
endif

let s:cpo_save = &cpo
set cpo&vim

let s:skip = 'synIDattr(synID(line("."), col("."), 0), "name") =~? "comment\\|string"'

" The innermost bracket open at (lnum, col), as [line, col], or [0, 0].
function! s:OpenBracket(lnum, col) abort
  call cursor(a:lnum, a:col)
  return searchpairpos('[({[]', '', '[)}\]]', 'bW', s:skip)
endfunction

" The indent of the statement that holds the bracket at (lnum, col): walk out of any
" parentheses that are open at the start of its line (a signature split over lines).
function! s:StatementIndent(lnum) abort
  let lnum = a:lnum
  let guard = 0
  while guard < 100
    let guard += 1
    let [l, c] = s:OpenBracket(lnum, 1)
    if l == 0 || getline(l)[c - 1] == '{'
      break
    endif
    let lnum = l
  endwhile
  return indent(lnum)
endfunction

function! GetTileIndent(lnum) abort
  let save = getcurpos()
  try
    let line = getline(a:lnum)
    " Inside a block comment: a ' * ' line goes under the star of its `/*`; other lines
    " keep their indentation.
    if line !~# '^\s*\%(//\|/\*\|$\)'
          \ && synIDattr(synID(a:lnum, indent(a:lnum) + 1, 0), "name") ==# "tileComment"
      if line =~# '^\s*\*'
        call cursor(a:lnum, 1)
        let start = search('/\*', 'bnW')
        return start > 0 ? indent(start) + 1 : -1
      endif
      return -1
    endif
    let [l, c] = s:OpenBracket(a:lnum, 1)
    if l == 0
      return 0
    endif
    let opener = getline(l)[c - 1]
    let closes = line =~# '^\s*[)}\]]'
    if opener ==# '{' || getline(l)[c :] =~# '^\s*\%(//.*\)\=$'
      let base = s:StatementIndent(l)
      return closes ? base : base + shiftwidth()
    endif
    " `(` or `[` with text after it: align after the bracket, a closer with the statement.
    return closes ? s:StatementIndent(l) : c
  finally
    call setpos('.', save)
  endtry
endfunction

let &cpo = s:cpo_save
unlet s:cpo_save
