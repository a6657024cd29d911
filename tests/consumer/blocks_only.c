/* blocks_only.c - an allocator that only reports its blocks (cumemhist::blocks, header-only):
 * it links nothing, and with no recorder in the process each call is a branch that does nothing. */
#include <stdio.h>

#include <cumemhist/blocks.h>

int main(void)
{
    CMH_BLOCK_ALLOC(0x1000, 512, 500, 0);
    CMH_BLOCK_FREE_COMPLETED(0x1000);
    puts("blocks_only: ok");
    return 0;
}
