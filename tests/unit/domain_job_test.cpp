#include "jobman/domain/job.hpp"

#include <gtest/gtest.h>

namespace jobman::domain {
namespace domain_job_test {

TEST(DomainPhase, NamesRoundTrip) {
  for (Phase phase : all_phases()) {
    EXPECT_EQ(parse_phase(to_string(phase)), phase) << to_string(phase);
  }
  EXPECT_EQ(all_phases().size(), 10U);
  EXPECT_EQ(all_phases().front(), Phase::pending);
  EXPECT_EQ(to_string(Phase::provisioning), "PROVISIONING");
  EXPECT_EQ(parse_phase("running"), Phase::running) << "parsing ignores case";
  EXPECT_EQ(parse_phase("Recovering"), Phase::recovering);
  EXPECT_EQ(parse_phase("RUN"), std::nullopt);
  EXPECT_EQ(parse_phase(""), std::nullopt);
}

TEST(DomainPhase, TerminalPhasesAreTheFourEndings) {
  std::vector<Phase> terminal;
  for (Phase phase : all_phases()) {
    if (is_terminal(phase)) {
      terminal.push_back(phase);
    }
  }
  EXPECT_EQ(terminal, (std::vector<Phase>{Phase::succeeded, Phase::failed, Phase::cancelled, Phase::deleted}));
}

TEST(DomainPhase, DesiredStateNamesRoundTrip) {
  for (DesiredState desired : {DesiredState::run, DesiredState::stop, DesiredState::remove, DesiredState::clean}) {
    EXPECT_EQ(parse_desired_state(to_string(desired)), desired) << to_string(desired);
  }
  EXPECT_EQ(to_string(DesiredState::remove), "delete");
  EXPECT_EQ(parse_desired_state("delete"), DesiredState::remove);
  EXPECT_EQ(parse_desired_state("remove"), std::nullopt);
}

// Every attempt outcome, in declaration order.
const std::vector<AttemptOutcome> kAttemptOutcomes = {
    AttemptOutcome::none,        AttemptOutcome::succeeded, AttemptOutcome::preempted,    AttemptOutcome::failed,
    AttemptOutcome::restart,     AttemptOutcome::cancelled, AttemptOutcome::bad_hardware, AttemptOutcome::rejected,
    AttemptOutcome::timed_out,   AttemptOutcome::quota,     AttemptOutcome::refused,      AttemptOutcome::idle,
    AttemptOutcome::interrupted, AttemptOutcome::unknown};

TEST(DomainAttemptOutcome, NamesRoundTripWithTheStoresSpelling) {
  for (AttemptOutcome outcome : kAttemptOutcomes) {
    EXPECT_EQ(parse_attempt_outcome(to_string(outcome)), outcome) << to_string(outcome);
  }
  // The words the store has always kept, and the commands show.
  EXPECT_EQ(to_string(AttemptOutcome::none), "");
  EXPECT_EQ(to_string(AttemptOutcome::succeeded), "succeeded");
  EXPECT_EQ(to_string(AttemptOutcome::preempted), "preempted");
  EXPECT_EQ(to_string(AttemptOutcome::failed), "failed");
  EXPECT_EQ(to_string(AttemptOutcome::restart), "restart");
  EXPECT_EQ(to_string(AttemptOutcome::cancelled), "cancelled");
  EXPECT_EQ(to_string(AttemptOutcome::bad_hardware), "bad-hardware");
  EXPECT_EQ(to_string(AttemptOutcome::rejected), "rejected");
  EXPECT_EQ(to_string(AttemptOutcome::timed_out), "timed-out");
  EXPECT_EQ(to_string(AttemptOutcome::quota), "quota");
  EXPECT_EQ(to_string(AttemptOutcome::refused), "refused");
  EXPECT_EQ(to_string(AttemptOutcome::idle), "idle");
  EXPECT_EQ(to_string(AttemptOutcome::interrupted), "interrupted");
  EXPECT_EQ(parse_attempt_outcome(""), AttemptOutcome::none);
  EXPECT_EQ(parse_attempt_outcome("Preempted"), std::nullopt) << "the store's spelling only";
  EXPECT_EQ(parse_attempt_outcome("bad_hardware"), std::nullopt);
  EXPECT_EQ(parse_attempt_outcome("exploded"), std::nullopt);
}

TEST(DomainAttemptOutcome, PredicatesSayWhatTheOutcomesHaveInCommon) {
  std::vector<AttemptOutcome> bad;
  std::vector<AttemptOutcome> given_up;
  std::vector<AttemptOutcome> before_up;
  for (AttemptOutcome outcome : kAttemptOutcomes) {
    if (is_bad_slice(outcome)) {
      bad.push_back(outcome);
    }
    if (is_request_given_up(outcome)) {
      given_up.push_back(outcome);
    }
    if (can_end_before_slice_up(outcome)) {
      before_up.push_back(outcome);
    }
  }
  EXPECT_EQ(bad, (std::vector<AttemptOutcome>{AttemptOutcome::bad_hardware, AttemptOutcome::rejected}));
  EXPECT_EQ(given_up,
            (std::vector<AttemptOutcome>{AttemptOutcome::timed_out, AttemptOutcome::quota, AttemptOutcome::refused}));
  EXPECT_EQ(before_up,
            (std::vector<AttemptOutcome>{AttemptOutcome::preempted, AttemptOutcome::failed, AttemptOutcome::cancelled,
                                         AttemptOutcome::bad_hardware, AttemptOutcome::rejected,
                                         AttemptOutcome::timed_out, AttemptOutcome::quota, AttemptOutcome::refused}));
}

TEST(DomainRivalOutcome, NamesRoundTripWithTheStoresSpelling) {
  for (RivalOutcome outcome : {RivalOutcome::racing, RivalOutcome::outrun, RivalOutcome::lost, RivalOutcome::abandoned,
                               RivalOutcome::unknown}) {
    EXPECT_EQ(parse_rival_outcome(to_string(outcome)), outcome) << to_string(outcome);
  }
  EXPECT_EQ(to_string(RivalOutcome::racing), "");
  EXPECT_EQ(to_string(RivalOutcome::outrun), "outrun");
  EXPECT_EQ(to_string(RivalOutcome::lost), "lost");
  EXPECT_EQ(to_string(RivalOutcome::abandoned), "abandoned");
  EXPECT_EQ(parse_rival_outcome(""), RivalOutcome::racing);
  EXPECT_EQ(parse_rival_outcome("won"), std::nullopt);
  EXPECT_EQ(parse_rival_outcome("preempted"), std::nullopt) << "an attempt's outcome is not a rival's";
}

TEST(DomainJob, JobIdsArePaddedAndParsed) {
  EXPECT_EQ(format_job_id(42), "000042");
  EXPECT_EQ(format_job_id(1234567), "1234567");
  EXPECT_EQ(parse_job_id("000042"), 42);
  EXPECT_EQ(parse_job_id("42"), 42);
  EXPECT_EQ(parse_job_id("0"), std::nullopt);
  EXPECT_EQ(parse_job_id("-4"), std::nullopt);
  EXPECT_EQ(parse_job_id("4x"), std::nullopt);
  EXPECT_EQ(parse_job_id(""), std::nullopt);
}

TEST(DomainJob, ExitCodesSpeakOfJobs) {
  EXPECT_EQ(static_cast<int>(job_exit::no_such_job), 3);
  EXPECT_EQ(static_cast<int>(job_exit::failed), 4);
  EXPECT_EQ(static_cast<int>(job_exit::cancelled), 5);
  EXPECT_EQ(NoSuchJobError("no job 000042").code(), job_exit::no_such_job);
}

} // namespace domain_job_test
} // namespace jobman::domain
