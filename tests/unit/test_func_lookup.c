/* How a --reentry name meets the functions of a program: a bare name
 * matches a qualified name equal to it or ending with "." and it (methods,
 * nested functions), never a mere suffix of a component; FILE matches at a
 * path separator. */
#include "python/func_lookup.h"
#include "unit.h"

static bool name_matches(const char *text, const char *qualname)
{
    struct py_func_spec spec;
    if (py_func_spec_parse(text, &spec) != 0)
        return false;
    return py_func_spec_matches_name(&spec, qualname);
}

static bool file_matches(const char *text, const char *filename)
{
    struct py_func_spec spec;
    if (py_func_spec_parse(text, &spec) != 0)
        return false;
    return py_func_spec_matches_file(&spec, filename);
}

static void test_names(void)
{
    CHECK(name_matches("_append_to_free_list", "_append_to_free_list"));
    CHECK(name_matches("_append_to_free_list", "Pool._append_to_free_list"));
    CHECK(name_matches("_append_to_free_list", "make_pool.<locals>._append_to_free_list"));
    CHECK(name_matches("Pool._append_to_free_list", "Pool._append_to_free_list"));
    CHECK(name_matches("Pool._append_to_free_list", "Outer.Pool._append_to_free_list"));
    CHECK(!name_matches("Pool._append_to_free_list", "GeneratorPool._append_to_free_list"));
    CHECK(!name_matches("append_to_free_list", "Pool._append_to_free_list"));
    CHECK(!name_matches("_append_to_free_list", "Pool._append_to_free_list2"));
    CHECK(!name_matches("Pool", "Pool._append_to_free_list"));
    CHECK(name_matches("pool.py:_append_to_free_list", "Pool._append_to_free_list"));
}

static void test_files(void)
{
    CHECK(file_matches("Pool.f", "/srv/app/pool.py"));          /* no FILE: any */
    CHECK(file_matches("pool.py:Pool.f", "/srv/app/pool.py"));
    CHECK(file_matches("app/pool.py:Pool.f", "/srv/app/pool.py"));
    CHECK(file_matches("pool.py:Pool.f", "pool.py"));
    CHECK(!file_matches("pool.py:Pool.f", "/srv/app/mempool.py"));
    CHECK(!file_matches("other/pool.py:Pool.f", "/srv/app/pool.py"));
}

static void test_parse(void)
{
    struct py_func_spec spec;
    CHECK_EQ_INT(py_func_spec_parse("pool.py:Pool.f", &spec), 0);
    CHECK_EQ_STR(spec.file, "pool.py");
    CHECK_EQ_STR(spec.qualname, "Pool.f");
    CHECK_EQ_INT(py_func_spec_parse(":f", &spec), -1);
    CHECK_EQ_INT(py_func_spec_parse("pool.py:", &spec), -1);
}

int main(void)
{
    test_names();
    test_files();
    test_parse();
    return unit_report("test_func_lookup");
}
