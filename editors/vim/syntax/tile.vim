" Vim syntax file
" Language:    Tile (block/tile GPU language)
" Filenames:   *.tile
" The word lists between the GENERATED markers come from the grammar and the built-in
" registry: run `python3 editors/generate.py` after changing either.

if exists("b:current_syntax")
  finish
endif

let s:cpo_save = &cpo
set cpo&vim

syn iskeyword @,48-57,_,192-255
syn case match

" BEGIN GENERATED (editors/generate.py rewrites this region; do not edit by hand)
syn keyword tileDeclaration nextgroup=tileFunctionName skipwhite fn kernel
syn keyword tileStorage const let var
syn keyword tileModifier static
syn keyword tileConditional else if
syn keyword tileRepeat for in while
syn keyword tileJump break continue return
syn keyword tileInclude as from import
syn keyword tileOperatorWord and not or
syn keyword tileBoolean false true
syn keyword tileType bool i8 i16 i32 i64 u8 u16 u32 u64 f16 bf16 f32 f64 tf32 f8e4m3 f8e5m2 f4e2m1
      \ f6e2m3 f6e3m2 ue8m0 f4e2m1x2
syn keyword tileTypeConstructor Tile Array Optional List Symmetric
syn keyword tileFloatWord inf nan
syn keyword tileAttributeHelper by_target
syn keyword tileBuiltin abs acos acosh arange argmax argmin argsort asin asinh assert astype atan atan2
      \ atanh atomic_add atomic_and atomic_cas atomic_max atomic_min atomic_or
      \ atomic_xchg atomic_xor barrier bid bitcast bits broadcast_to cat cbrt cdiv ceil
      \ cluster_rank cluster_size copysign cos cosh cumprod cumsum dim div erf exp exp2
      \ expand_dims expm1 extract fence floor floordiv fma fmod full gather hypot
      \ is_floating is_integer is_none isfinite isinf isnan len list_item load log log10
      \ log1p log2 matmul max maximum min minimum mma mma_scaled multimem_reduce
      \ multimem_store num_blocks num_tiles ones pad peer permute pow print prod rand
      \ randint randn rank reduce reshape rint round rsqrt scan scatter sigmoid sign
      \ signal sin sinh sort sqrt static_assert store stride sum take tan tanh topk
      \ transpose trunc unpack_f4 wait_until where world_size zeros
" END GENERATED

" Operators first: the matches defined later win where they start at the same column.
" `//` always starts a comment (the grammar has no `//` operator); a lone `!` is no
" operator.
syn match tileOperator "[-+*/%&|^~<>=@]"
syn match tileOperator "!="
syn match tileOperator "->"
syn match tileDelimiter "[.,;:]"

" Numbers, as the grammar's DEC_INT, HEX_INT, BIN_INT and FLOAT terminals (there is no `1.`
" or `.5` form).  Later definitions win where they start at the same column.
syn match tileNumber "\<\d\%(_\=\d\)*"
syn match tileNumber "\<0[xX]\%(_\=\x\)\+"
syn match tileNumber "\<0[bB]\%(_\=[01]\)\+"
syn match tileFloat "\<\d\%(_\=\d\)*[eE][+-]\=\d\%(_\=\d\)*"
syn match tileFloat "\<\d\%(_\=\d\)*\.\d\%(_\=\d\)*\%([eE][+-]\=\d\%(_\=\d\)*\)\="

" The name declared by `fn` / `kernel` (their `nextgroup`; it wins over a built-in's keyword).
syn match tileFunctionName "\h\w*" contained

" Attributes: `@name` at the start of a line, or a known attribute anywhere.
syn match tileAttribute "^\s*\zs@\h\w*"
syn match tileAttribute "@\%(launch\|host\)\>"

" Strings with C escapes; an unterminated string ends at the end of the line.
syn match tileEscapeError "\\." contained
syn match tileEscape "\\\%(x\x\{2}\|u\x\{4}\|U\x\{8}\|\o\{1,3}\|[abfnrtv\\\"'?]\)" contained
syn region tileString start=+"+ skip=+\\\\\|\\"+ end=+"+ end=+$+ contains=tileEscape,tileEscapeError,@Spell

" Comments.
syn keyword tileTodo TODO FIXME XXX NOTE contained
syn region tileComment start="//" end="$" contains=tileTodo,@Spell
syn region tileComment start="/\*" end="\*/" contains=tileTodo,@Spell fold
syn sync ccomment tileComment minlines=50

" Braces fold.
syn region tileBlock start="{" end="}" transparent fold

hi def link tileDeclaration     Keyword
hi def link tileStorage         StorageClass
hi def link tileModifier        StorageClass
hi def link tileConditional     Conditional
hi def link tileRepeat          Repeat
hi def link tileJump            Statement
hi def link tileInclude         Include
hi def link tileOperatorWord    Operator
hi def link tileBoolean         Boolean
hi def link tileKeyword         Keyword
hi def link tileType            Type
hi def link tileTypeConstructor Type
hi def link tileFloatWord       Float
hi def link tileAttributeHelper PreProc
hi def link tileBuiltin         Function
hi def link tileFunctionName    Function
hi def link tileAttribute       PreProc
hi def link tileOperator        Operator
hi def link tileDelimiter       Delimiter
hi def link tileNumber          Number
hi def link tileFloat           Float
hi def link tileString          String
hi def link tileEscape          SpecialChar
hi def link tileEscapeError     Error
hi def link tileComment         Comment
hi def link tileTodo            Todo

let b:current_syntax = "tile"

let &cpo = s:cpo_save
unlet s:cpo_save
