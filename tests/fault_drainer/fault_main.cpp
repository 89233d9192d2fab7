// The doctest runner of the fault tests. Like tests/doctest_main.cpp, plus one check: a run that
// selected no test case (a --test-case filter in meson.build that matches nothing) fails instead
// of passing with nothing tested.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

namespace {

int g_cases_started = 0;

// A listener that only counts the test cases that start.
struct CaseCounter : doctest::IReporter {
  explicit CaseCounter(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData&) override { ++g_cases_started; }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};
REGISTER_LISTENER("fault_case_counter", 1, CaseCounter);

}  // namespace

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int result = context.run();
  if (context.shouldExit()) return result;
  if (g_cases_started == 0) {
    std::fprintf(stderr, "no test case matched the filters given (a --test-case pattern in "
                         "tests/fault_drainer/meson.build that matches nothing?)\n");
    return 1;
  }
  return result;
}
