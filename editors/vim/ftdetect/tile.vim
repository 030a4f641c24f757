" Tile (block/tile GPU language): detect *.tile files.
autocmd BufNewFile,BufRead *.tile setfiletype tile
