// The store's memory of bad hardware: the machines of a slice, findings kept beyond their job, and the lookup that
// rejects a new slice on a known-bad machine.
#include "jobman/store/attempts.hpp"
#include "jobman/store/bad_hardware.hpp"
#include "jobman/store/events.hpp"
#include "jobman/store/job_store.hpp"
#include "jobman/store/jobs.hpp"
#include "support/sample_job.hpp"
#include "support/store_backends.hpp"

#include <gtest/gtest.h>

namespace jobman::store {
namespace store_bad_hardware_test {

using test::make_job;

domain::BadHardwareRecord finding(std::int64_t job, const std::string& machine, const std::string& signal = "output") {
  domain::BadHardwareRecord f;
  f.job_id = job;
  f.attempt = 1;
  f.zone = "us-central2-b";
  f.accelerator = "v4-8";
  f.node = "n-1";
  f.worker = 0;
  f.physical_host = machine;
  f.signal = signal;
  f.detail = "step=3 loss=nan";
  return f;
}

class StoreBadHardwareTest : public test::StoreBackendTest {};

TEST_P(StoreBadHardwareTest, AnAttemptRecordsWhenItsSliceCameUpAndOnWhichMachines) {
  auto store = open_store();
  const auto id = store.jobs().create({make_job("a")}).front();
  store.attempts().begin(id, "qr", "node", "us-central2-b");
  EXPECT_FALSE(store.attempts().of(id).front().active_ms);
  store.attempts().record_slice_active(id, 1, {"b1/s2/h3", "", "b1/s2/h5"});
  const auto first = store.attempts().of(id).front();
  ASSERT_TRUE(first.active_ms);
  EXPECT_EQ(first.physical_hosts, (std::vector<std::string>{"b1/s2/h3", "", "b1/s2/h5"}));
  store.attempts().record_slice_active(id, 1, {});
  const auto again = store.attempts().of(id).front();
  EXPECT_EQ(again.active_ms, first.active_ms) << "the first time the slice came up stands";
  EXPECT_TRUE(again.physical_hosts.empty());
}

TEST_P(StoreBadHardwareTest, FindingsAreKeptBeyondTheirJobAndFoundByMachine) {
  auto store = open_store();
  const auto ids = store.jobs().create({make_job("a"), make_job("b")});
  store.bad_hardware().record(finding(ids[0], "b1/s1/h1"));
  store.bad_hardware().record(finding(ids[1], "b2/s2/h2", "preflight"));
  store.bad_hardware().record(finding(ids[1], ""));

  const auto of_b = store.bad_hardware().of(ids[1]);
  ASSERT_EQ(of_b.size(), 2U);
  EXPECT_EQ(of_b[0].signal, "preflight");
  EXPECT_EQ(of_b[0].physical_host, "b2/s2/h2");
  EXPECT_GT(of_b[0].ts_ms, 0);
  const auto events = store.events().of(ids[1]);
  EXPECT_NE(events.back().message.find("bad hardware on worker 0 of n-1"), std::string::npos) << events.back().message;

  store.jobs().remove(ids[0]);
  const auto on = store.bad_hardware().on({"x/y/z", "b1/s1/h1", ""}, 0);
  ASSERT_EQ(on.size(), 1U) << "a cleaned job's finding is still known";
  EXPECT_EQ(on[0].job_id, ids[0]);
  EXPECT_TRUE(store.bad_hardware().on({""}, 0).empty()) << "an unknown machine matches nothing";
  EXPECT_TRUE(store.bad_hardware().on({"b1/s1/h1"}, on[0].ts_ms + 1).empty()) << "older findings are forgotten";
}

TEST_P(StoreBadHardwareTest, ABadSliceIsCountedApartFromFailuresAndPreemptions) {
  auto store = open_store();
  const auto id = store.jobs().create({make_job("a")}).front();
  domain::PhaseChange change;
  change.to = domain::Phase::recovering;
  change.reason = "bad hardware";
  change.add_bad_hardware = 1;
  ASSERT_TRUE(store.jobs().transition(id, std::nullopt, change));
  const auto job = *store.jobs().find(id);
  EXPECT_EQ(job.bad_hardware, 1);
  EXPECT_EQ(job.failures, 0);
  EXPECT_EQ(job.preemptions, 0);
  EXPECT_NE(store.events().of(id).back().data_json.find("\"add_bad_hardware\":1"), std::string::npos);
}

JOBMAN_STORE_BACKENDS(StoreBadHardwareTest);

} // namespace store_bad_hardware_test
} // namespace jobman::store
