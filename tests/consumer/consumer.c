/* consumer.c - a program outside the tree that uses the installed C API: recorder.h to start
 * the recording and dump a snapshot, blocks.h to mark a moment (tests/install_test.sh builds it
 * with find_package(cumemhist) and with pkg-config). */
#include <stdio.h>

#include <cumemhist/blocks.h>
#include <cumemhist/recorder.h>

int main(int argc, char **argv)
{
    cmh_options o = {CMH_ENABLED_ALL, CMH_CONTEXT_NONE, 0, 0, 0};
    int rc = cmh_record_memory_history(&o);
    CMH_MARK("consumer");
    if (rc == CMH_OK) rc = cmh_dump_snapshot(argc > 1 ? argv[1] : "consumer.cmh");
    printf("consumer: %s\n", cmh_strerror(rc));
    return rc == CMH_OK ? 0 : 1;
}
