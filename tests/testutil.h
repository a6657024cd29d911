/*
 * testutil.h - helpers shared by the CUnit suites.
 */
#ifndef CMH_TESTUTIL_H
#define CMH_TESTUTIL_H

#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>

/* Run the registered suites; exit status 1 if any assertion failed (CUnit's own does not). */
static inline int cmh_test_main(void)
{
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
    CU_cleanup_registry();
    return failed ? 1 : 0;
}

#define CMH_ADD_TEST(suite, fn) CU_add_test(suite, #fn, fn)

#endif
