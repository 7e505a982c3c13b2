#include "jobman/domain/job.hpp"

#include <gtest/gtest.h>

namespace jobman::domain {
namespace {

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

} // namespace
} // namespace jobman::domain
