// The hosts of a multislice job's nodes as one target's: numbering across slices, what is kept in the attempt's
// directory, and the keys gcloud is given.
#include "jobman/core/gcloud_setup.hpp"
#include "jobman/core/slice_hosts.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "support/temp_dir.hpp"

#include <gtest/gtest.h>
#include <string>
#include <vector>

namespace jobman::test {
namespace core_slice_hosts_test {

// The hosts of one node of `count` workers whose numeric id is `id`, at 127.16.SLICE.W.
core::SliceHosts node_hosts(const std::string& id, int slice, int count) {
  core::SliceHosts hosts;
  hosts.node_id = id;
  for (int w = 0; w < count; ++w) {
    hosts.hosts.push_back(
        {"127.16." + std::to_string(slice) + "." + std::to_string(w + 1), 22, "tpu." + id + "-" + std::to_string(w)});
    hosts.host_keys.push_back("ssh-ed25519 AAAAkey" + id + "w" + std::to_string(w));
  }
  return hosts;
}

TEST(SliceNodeIds, OneSliceIsItsNodeAndSeveralAreNamedAfterThePrefix) {
  EXPECT_EQ(core::slice_node_ids("job-1-a1", 1), std::vector<std::string>{"job-1-a1"});
  EXPECT_EQ(core::slice_node_ids("job-1-a1", 3), (std::vector<std::string>{"job-1-a1-0", "job-1-a1-1", "job-1-a1-2"}));
}

TEST(JoinSliceHosts, WorkersAreNumberedSliceAfterSliceAndKeptWithTheirNodes) {
  const auto joined = core::join_slice_hosts({{"ms-0", node_hosts("111", 0, 2)}, {"ms-1", node_hosts("222", 1, 2)}});
  ASSERT_EQ(joined.hosts.size(), 4U);
  ASSERT_EQ(joined.host_keys.size(), 4U);
  EXPECT_TRUE(joined.complete());
  EXPECT_EQ(joined.node_id, "111");
  EXPECT_EQ(joined.hosts[2].node, "ms-1");
  EXPECT_EQ(joined.hosts[2].node_worker, 0);
  EXPECT_EQ(joined.hosts[2].address, "127.16.1.1");
  EXPECT_EQ(joined.hosts[3].host_key_alias, "tpu.222-1");
  EXPECT_EQ(joined.host_keys[3], "ssh-ed25519 AAAAkey222w1");

  // Kept in the attempt's directory and read back whole: each host's node and index there with it.
  const TempDir dir;
  core::save_slice_hosts(dir.path(), joined);
  const auto loaded = core::load_slice_hosts(dir.path());
  ASSERT_TRUE(loaded);
  ASSERT_EQ(loaded->hosts.size(), 4U);
  for (std::size_t w = 0; w < 4; ++w) {
    EXPECT_EQ(loaded->hosts[w].node, joined.hosts[w].node) << w;
    EXPECT_EQ(loaded->hosts[w].node_worker, joined.hosts[w].node_worker) << w;
    EXPECT_EQ(loaded->hosts[w].address, joined.hosts[w].address) << w;
  }
  // A single node's hosts name no node: the target's is theirs.
  core::save_slice_hosts(dir.path(), node_hosts("333", 0, 1));
  EXPECT_EQ(core::load_slice_hosts(dir.path())->hosts.front().node_worker, -1);
  EXPECT_EQ(core::load_slice_hosts(dir.path())->hosts.front().node, "");
}

TEST(JoinSliceHosts, GcloudIsGivenEachHostsKeyUnderItsOwnNodesAlias) {
  const TempDir home;
  const auto joined = core::join_slice_hosts({{"ms-0", node_hosts("111", 0, 1)}, {"ms-1", node_hosts("222", 1, 2)}});
  ASSERT_TRUE(core::add_gcloud_known_hosts(joined, home.path()));
  const auto lines = util::split(util::read_file(core::gcloud_known_hosts_file(home.path())), '\n');
  // gcloud looks a host's key up as tpu.NODE_ID-WORKER-<the key's last six characters>, WORKER counted in its node.
  const std::vector<std::string> expected = {
      core::gcloud_host_key_alias("111", 0, joined.host_keys[0]) + " " + joined.host_keys[0],
      core::gcloud_host_key_alias("222", 0, joined.host_keys[1]) + " " + joined.host_keys[1],
      core::gcloud_host_key_alias("222", 1, joined.host_keys[2]) + " " + joined.host_keys[2], ""};
  EXPECT_EQ(lines, expected);
}

} // namespace core_slice_hosts_test
} // namespace jobman::test
