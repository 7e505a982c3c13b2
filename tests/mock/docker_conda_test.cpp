// The mock's docker and conda stand-ins, run directly as a worker host runs them (no mock server needed).
#include "mock_cloud/worker_hosts.hpp"
#include "support/line_process.hpp"
#include "support/mock_cloud.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace docker_conda_test {

using jobman::test::eventually;
using jobman::test::RunResult;
using nlohmann::json;
namespace fs = std::filesystem;
using StreamingProcess = jobman::test::LineReadingProcess;

// The mock's tools directory, beside the built server.
fs::path tools_dir() {
  return fs::path(jobman::test::mock_cloud_binary()).parent_path() / "tools";
}

// The contents of `path`, or "" when it cannot be read.
std::string slurp(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// `text`'s lines.
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
  }
  return lines;
}

// A worker host's sandbox in a temporary directory: MOCK_TPU_WORKER_DIR, HOME inside it, the mock's tools first on
// PATH, and a marker (MOCK_TPU_HOST) of its own so that its processes can be found in the process table.
class WorkerHostToolTest : public ::testing::Test {
protected:
  jobman::test::TempDir dir;
  fs::path worker = dir / "worker";
  fs::path home = worker / "home";
  std::string marker = (dir / "host").string();

  void SetUp() override { fs::create_directories(home); }

  // The environment the tools run with; `extra` on top (an empty value unsets a variable).
  [[nodiscard]] std::map<std::string, std::string> env(const std::map<std::string, std::string>& extra = {}) const {
    const char* path = std::getenv("PATH");
    std::map<std::string, std::string> all = {
        {"MOCK_TPU_WORKER_DIR", worker.string()},
        {"MOCK_TPU_HOST", marker},
        {"HOME", home.string()},
        {"PATH", tools_dir().string() + ":" + (path == nullptr ? "/usr/bin:/bin" : path)},
        {"CONDA_PREFIX", ""},
        {"CONDA_DEFAULT_ENV", ""}};
    for (const auto& [key, value] : extra) {
      all[key] = value;
    }
    return all;
  }

  // Runs the stand-in `tool` with `args`.
  RunResult run_tool(const std::string& tool, const std::vector<std::string>& args,
                     const std::map<std::string, std::string>& extra = {}) {
    std::vector<std::string> argv = {(tools_dir() / tool).string()};
    argv.insert(argv.end(), args.begin(), args.end());
    jobman::test::RunOptions options;
    options.env = env(extra);
    return jobman::test::run_program(argv, options);
  }

  // The live processes carrying this host's marker.
  [[nodiscard]] std::vector<pid_t> host_processes() const { return jobman::mock::find_marked_processes(marker); }
};

class MockDockerTest : public WorkerHostToolTest {
protected:
  RunResult docker(const std::vector<std::string>& args, const std::map<std::string, std::string>& extra = {}) {
    return run_tool("docker", args, extra);
  }

  // `docker run ARGS...` in the background, its stdout read line by line.
  std::unique_ptr<StreamingProcess> docker_in_background(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {(tools_dir() / "docker").string()};
    argv.insert(argv.end(), args.begin(), args.end());
    return std::make_unique<StreamingProcess>(argv, env(), dir / "docker-stderr.txt", std::chrono::seconds(20));
  }

  // The record of container `name`, or null.
  [[nodiscard]] json record(const std::string& name) const {
    const auto file = worker / ".mock" / "docker" / "containers" / (name + ".json");
    return fs::exists(file) ? json::parse(slurp(file)) : json();
  }

  void SetUp() override {
    WorkerHostToolTest::SetUp();
    ASSERT_EQ(docker({"pull", "ubuntu:22.04"}).exit_code, 0);
  }
};

class MockCondaTest : public WorkerHostToolTest {
protected:
  RunResult conda(const std::vector<std::string>& args, const std::map<std::string, std::string>& extra = {}) {
    return run_tool("conda", args, extra);
  }

  [[nodiscard]] fs::path prefix(const std::string& name) const { return home / "miniconda3" / "envs" / name; }

  // Writes an environment file `file` with `body` into the test's directory.
  fs::path environment_file(const std::string& file, const std::string& body) const { return dir.write(file, body); }
};

// An environment file with conda and pip dependencies.
constexpr const char* kDemoEnvironment = R"(name: demo
channels:
  - conda-forge
dependencies:
  - python=3.11
  - numpy>=1.26
  - pip:
    - jax[tpu]==0.4.30
variables:
  DEMO_SETTING: on
)";

// ---------------------------------------------------------------------------------------------------------------
// Both.

TEST_F(WorkerHostToolTest, BothRefuseToRunOffAMockWorkerHost) {
  for (const std::string tool : {"docker", "conda"}) {
    const auto result = run_tool(tool, {"--version"}, {{"MOCK_TPU_WORKER_DIR", ""}});
    EXPECT_EQ(result.exit_code, 1) << tool;
    EXPECT_NE(result.err.find(tool + ": MOCK_TPU_WORKER_DIR is not set"), std::string::npos) << result.err;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// sudo, apt-get and python3.N.

TEST_F(WorkerHostToolTest, AptGetUnderSudoInstallsTheVenvPackageTheImageLacksAndPythonThenMakesVenvs) {
  fs::create_directories(worker / ".mock/apt");
  std::ofstream(worker / ".mock/apt/missing") << "python3.10-venv\n";
  const auto venv = (home / "v").string();
  const auto failed = run_tool("python3.10", {"-m", "venv", venv});
  EXPECT_EQ(failed.exit_code, 1);
  EXPECT_NE(failed.err.find("ensurepip is not available"), std::string::npos) << failed.err;
  EXPECT_NE(failed.err.find("apt install python3.10-venv"), std::string::npos) << failed.err;
  EXPECT_FALSE(fs::exists(home / "v/bin/activate")) << "the venv is left half-made";
  EXPECT_EQ(run_tool("python3.11", {"-m", "venv", (home / "other").string()}).exit_code, 0)
      << "only the Python whose package is missing fails";
  // apt-get changes the system: only as root, which is under sudo.
  const auto unprivileged = run_tool("apt-get", {"install", "-y", "python3.10-venv"});
  EXPECT_EQ(unprivileged.exit_code, 100);
  EXPECT_NE(unprivileged.err.find("are you root?"), std::string::npos) << unprivileged.err;
  const auto installed = run_tool("sudo", {"-n", "apt-get", "install", "-y", "python3.10-venv"});
  EXPECT_EQ(installed.exit_code, 0) << installed.err;
  EXPECT_NE(installed.out.find("Setting up python3.10-venv"), std::string::npos) << installed.out;
  EXPECT_EQ(slurp(worker / ".mock/apt/missing"), "");
  const auto made = run_tool("python3.10", {"-m", "venv", venv});
  EXPECT_EQ(made.exit_code, 0) << made.err;
  EXPECT_TRUE(fs::exists(home / "v/bin/activate"));
  // A package no source has fails; off a worker host apt-get refuses to run.
  const auto unknown = run_tool("sudo", {"-n", "apt-get", "install", "-y", "does-not-exist-pkg"});
  EXPECT_EQ(unknown.exit_code, 100);
  EXPECT_NE(unknown.err.find("E: Unable to locate package does-not-exist-pkg"), std::string::npos) << unknown.err;
  EXPECT_EQ(run_tool("sudo", {"-n", "apt-get", "update"}, {{"MOCK_TPU_WORKER_DIR", ""}}).exit_code, 1);
}

TEST_F(WorkerHostToolTest, SudoRunsOnlyTheMocksOwnTools) {
  const auto docker = run_tool("sudo", {"-n", "docker", "--version"});
  EXPECT_EQ(docker.exit_code, 0) << docker.err;
  const auto outside = run_tool("sudo", {"-n", "id", "-u"});
  EXPECT_EQ(outside.exit_code, 1);
  EXPECT_EQ(outside.out, "");
  EXPECT_NE(outside.err.find("runs only the mock's own tools"), std::string::npos) << outside.err;
}

// ---------------------------------------------------------------------------------------------------------------
// docker.

TEST_F(MockDockerTest, PullRecordsImagesThatInspectAndImagesShow) {
  auto missing = docker({"image", "inspect", "busybox"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("Error: No such image: busybox"), std::string::npos) << missing.err;

  auto pulled = docker({"pull", "busybox"});
  ASSERT_EQ(pulled.exit_code, 0) << pulled.err;
  EXPECT_NE(pulled.out.find("latest: Pulling from library/busybox\n"), std::string::npos) << pulled.out;
  EXPECT_NE(pulled.out.find("Status: Downloaded newer image for busybox:latest\n"), std::string::npos) << pulled.out;
  auto again = docker({"pull", "busybox:latest"});
  EXPECT_EQ(again.exit_code, 0);
  EXPECT_NE(again.out.find("Status: Image is up to date for busybox:latest\n"), std::string::npos) << again.out;

  auto inspected = docker({"image", "inspect", "busybox"});
  ASSERT_EQ(inspected.exit_code, 0) << inspected.err;
  const auto images = json::parse(inspected.out);
  ASSERT_EQ(images.size(), 1U);
  EXPECT_EQ(images[0]["RepoTags"], json::array({"busybox:latest"}));
  EXPECT_TRUE(std::regex_match(images[0]["Id"].get<std::string>(), std::regex("sha256:[0-9a-f]{64}")));
  EXPECT_EQ(docker({"inspect", "--type=image", "busybox:latest"}).out, inspected.out);
  EXPECT_EQ(docker({"inspect", "--type", "image", "docker.io/library/busybox"}).out, inspected.out);
  EXPECT_EQ(docker({"inspect", "--type=image", "busybox:1.36"}).exit_code, 1) << "another tag is another image";

  auto registry = docker({"pull", "us-docker.pkg.dev/proj/repo/trainer:v2"});
  ASSERT_EQ(registry.exit_code, 0) << registry.err;
  EXPECT_NE(registry.out.find("v2: Pulling from proj/repo/trainer\n"), std::string::npos) << registry.out;
  const std::string digest = "sha256:" + std::string(64, 'a');
  ASSERT_EQ(docker({"pull", "gcr.io/proj/tool@" + digest}).exit_code, 0);
  const auto by_digest = json::parse(docker({"image", "inspect", "gcr.io/proj/tool@" + digest}).out);
  EXPECT_EQ(by_digest[0]["RepoDigests"], json::array({"gcr.io/proj/tool@" + digest}));

  const auto listed = docker({"images"}).out;
  EXPECT_TRUE(std::regex_search(listed, std::regex("\nbusybox +latest +[0-9a-f]{12} ")));
  EXPECT_TRUE(std::regex_search(listed, std::regex("\nus-docker.pkg.dev/proj/repo/trainer +v2 ")));
  auto info = docker({"info"});
  EXPECT_EQ(info.exit_code, 0);
  EXPECT_NE(info.out.find("Server Version: mock"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("Images: 4"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("Containers: 0"), std::string::npos) << info.out;
}

TEST_F(MockDockerTest, PullOfAnImageTheRegistryLacksFailsLikeDocker) {
  auto pulled = docker({"pull", "gcr.io/proj/does-not-exist:1"});
  EXPECT_EQ(pulled.exit_code, 1);
  EXPECT_NE(pulled.err.find("Error response from daemon: pull access denied for gcr.io/proj/does-not-exist"),
            std::string::npos)
      << pulled.err;
  EXPECT_EQ(docker({"image", "inspect", "gcr.io/proj/does-not-exist:1"}).exit_code, 1);
  auto run = docker({"run", "--rm", "gcr.io/proj/does-not-exist:1", "true"});
  EXPECT_EQ(run.exit_code, 125);
  EXPECT_NE(run.err.find("Unable to find image 'gcr.io/proj/does-not-exist:1' locally"), std::string::npos);
  EXPECT_NE(run.err.find("pull access denied"), std::string::npos) << run.err;
}

TEST_F(MockDockerTest, RunPullsAMissingImageFirst) {
  auto run = docker({"run", "--rm", "alpine", "true"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("Unable to find image 'alpine:latest' locally"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("Status: Downloaded newer image for alpine:latest"), std::string::npos) << run.err;
  EXPECT_EQ(docker({"image", "inspect", "alpine"}).exit_code, 0);
}

TEST_F(MockDockerTest, RunGivesTheContainerOnlyItsOwnEnvironmentAndWorkdir) {
  const auto env_file = dir.write("container.env", "# settings\nFROM_FILE=file\n\nOVERRIDDEN=file\n");
  const auto work = dir / "work";
  fs::create_directories(work);
  auto run = docker({"run", "--rm", "-e", "DIRECT=1", "--env=OVERRIDDEN=flag", "-e", "COPIED", "--env-file",
                     env_file.string(), "-w", work.string(), "ubuntu:22.04", "sh", "-c",
                     "echo \"$DIRECT $COPIED $FROM_FILE $OVERRIDDEN [$SECRET] $MOCK_TPU_HOST\"; pwd; echo $HOSTNAME"},
                    {{"COPIED", "from-caller"}, {"SECRET", "not-for-containers"}});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto lines = lines_of(run.out);
  ASSERT_EQ(lines.size(), 3U) << run.out;
  EXPECT_EQ(lines[0], "1 from-caller file flag [] " + marker);
  EXPECT_EQ(lines[1], fs::canonical(work).string());
  EXPECT_TRUE(std::regex_match(lines[2], std::regex("[0-9a-f]{12}"))) << lines[2];

  EXPECT_EQ(docker({"run", "--rm", "ubuntu:22.04", "pwd"}).out, "/\n") << "docker's default workdir";
  EXPECT_EQ(
      docker({"run", "--rm", "-v", work.string() + ":" + work.string() + ":ro", "ubuntu:22.04", "true"}).exit_code, 0)
      << "a same-path bind mount is a no-op";
  EXPECT_TRUE(fs::is_empty(worker / ".mock" / "docker" / "containers")) << "--rm leaves no record";
}

TEST_F(MockDockerTest, RunExitsWithTheContainersStatus) {
  EXPECT_EQ(docker({"run", "--rm", "ubuntu:22.04", "sh", "-c", "exit 7"}).exit_code, 7);
  EXPECT_EQ(docker({"run", "--rm", "ubuntu:22.04", "sh", "-c", "kill -TERM $$"}).exit_code, 128 + SIGTERM);
  EXPECT_EQ(docker({"run", "--rm", "ubuntu:22.04", "sh", "-c", "kill -KILL $$"}).exit_code, 128 + SIGKILL);
  auto missing = docker({"run", "--rm", "ubuntu:22.04", "no-such-command-here"});
  EXPECT_EQ(missing.exit_code, 127);
  EXPECT_NE(missing.err.find("\"no-such-command-here\": executable file not found in $PATH"), std::string::npos)
      << missing.err;
}

TEST_F(MockDockerTest, RunRejectsWhatItCannotEmulateWith125) {
  auto unknown = docker({"run", "--bogus", "ubuntu:22.04", "true"});
  EXPECT_EQ(unknown.exit_code, 125);
  EXPECT_NE(unknown.err.find("unknown flag: --bogus"), std::string::npos) << unknown.err;

  auto moved = docker({"run", "-v", dir.path().string() + ":/data", "ubuntu:22.04", "true"});
  EXPECT_EQ(moved.exit_code, 125);
  EXPECT_NE(moved.err.find("needs the same path on both sides"), std::string::npos) << moved.err;
  EXPECT_NE(moved.err.find("different target path, /data"), std::string::npos) << moved.err;

  auto detached = docker({"run", "-d", "ubuntu:22.04", "sleep", "1"});
  EXPECT_EQ(detached.exit_code, 125);
  EXPECT_NE(detached.err.find("-d/--detach is not supported"), std::string::npos) << detached.err;

  auto workdir = docker({"run", "--workdir=/no/such/dir", "ubuntu:22.04", "true"});
  EXPECT_EQ(workdir.exit_code, 125);
  EXPECT_NE(workdir.err.find("workdir /no/such/dir does not exist on this mock host"), std::string::npos)
      << workdir.err;

  auto network = docker({"run", "--network", "bridge", "ubuntu:22.04", "true"});
  EXPECT_EQ(network.exit_code, 125);
  EXPECT_EQ(docker({"run", "--rm", "--network=host", "--net", "host", "--ipc=host", "--privileged", "--init", "-it",
                    "--shm-size", "16g", "-u", "1000", "ubuntu:22.04", "true"})
                .exit_code,
            0)
      << "the options a TPU VM's docker run takes are accepted";
  EXPECT_EQ(docker({"ps", "-aq"}).out, "") << "no container was left behind";
}

TEST_F(MockDockerTest, StopEndsARunningContainerItsRecordAndItsProcess) {
  auto run = docker_in_background(
      {"run", "--rm", "--name", "sleeper", "ubuntu:22.04", "sh", "-c", "echo ready; exec sleep 1000"});
  ASSERT_TRUE(run->read_until("ready"));
  const auto running = record("sleeper");
  ASSERT_TRUE(running.is_object());
  const pid_t pid = running["Pid"].get<pid_t>();
  // Its environment is unreadable for a moment while `sh` execs `sleep`: the marker is there once the exec is over.
  EXPECT_TRUE(eventually([&] {
    const auto marked = host_processes();
    return std::find(marked.begin(), marked.end(), pid) != marked.end();
  })) << "the container carries the host's marker";

  auto ps = docker({"ps"});
  EXPECT_TRUE(std::regex_search(ps.out, std::regex("\n[0-9a-f]{12} +ubuntu:22.04 +\"sh -c echo ready.*sleeper\n")))
      << ps.out;
  EXPECT_EQ(docker({"ps", "-q", "--filter", "name=sleeper"}).out,
            running["Id"].get<std::string>().substr(0, 12) + "\n");
  EXPECT_EQ(docker({"ps", "-q", "--filter", "name=other"}).out, "");

  auto clash = docker({"run", "--name", "sleeper", "ubuntu:22.04", "true"});
  EXPECT_EQ(clash.exit_code, 125);
  EXPECT_NE(clash.err.find("Conflict. The container name \"/sleeper\" is already in use"), std::string::npos)
      << clash.err;

  auto stopped = docker({"stop", "sleeper"});
  EXPECT_EQ(stopped.exit_code, 0) << stopped.err;
  EXPECT_EQ(stopped.out, "sleeper\n");
  EXPECT_EQ(run->finish(), 128 + SIGTERM) << "docker run ends with its container";
  EXPECT_TRUE(record("sleeper").is_null()) << "--rm removed the record";
  EXPECT_TRUE(host_processes().empty()) << host_processes().size() << " processes left";
  EXPECT_EQ(docker({"ps", "-q"}).out, "");
  auto again = docker({"stop", "sleeper"});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find("Error response from daemon: No such container: sleeper"), std::string::npos) << again.err;
}

TEST_F(MockDockerTest, StopKillsAContainerThatIgnoresSigtermAfterTheTimeout) {
  auto run = docker_in_background(
      {"run", "--name", "stubborn", "ubuntu:22.04", "sh", "-c", "trap '' TERM; echo ready; exec sleep 1000"});
  ASSERT_TRUE(run->read_until("ready"));
  EXPECT_EQ(docker({"stop", "-t", "1", "stubborn"}).exit_code, 0);
  EXPECT_EQ(run->finish(), 128 + SIGKILL);
  EXPECT_EQ(record("stubborn")["ExitCode"], 128 + SIGKILL) << "without --rm the exited container stays";
  EXPECT_TRUE(std::regex_search(docker({"ps", "-a"}).out, std::regex("Exited \\(137\\) .* stubborn\n")));
  EXPECT_EQ(docker({"ps"}).out.find("stubborn"), std::string::npos) << "ps lists running containers only";
  EXPECT_TRUE(host_processes().empty());

  auto clash = docker({"run", "--name", "stubborn", "ubuntu:22.04", "true"});
  EXPECT_EQ(clash.exit_code, 125) << "an exited container keeps its name, as docker's do";
  EXPECT_EQ(docker({"rm", "stubborn"}).exit_code, 0);
  EXPECT_EQ(docker({"run", "--rm", "--name", "stubborn", "ubuntu:22.04", "true"}).exit_code, 0);
}

TEST_F(MockDockerTest, SignalsToDockerRunReachTheContainer) {
  auto run = docker_in_background(
      {"run", "--rm", "ubuntu:22.04", "sh", "-c", "trap 'echo got-term; exit 7' TERM; echo ready; sleep 1000 & wait"});
  ASSERT_TRUE(run->read_until("ready"));
  run->send(SIGTERM);
  EXPECT_TRUE(run->read_until("got-term"));
  EXPECT_EQ(run->finish(), 7);
  EXPECT_TRUE(host_processes().empty()) << "the container's other processes end with it";
}

TEST_F(MockDockerTest, KillAndForcedRemoveEndContainersAtOnce) {
  auto victim = docker_in_background({"run", "--name", "victim", "ubuntu:22.04", "sh", "-c", "echo ready; sleep 1000"});
  ASSERT_TRUE(victim->read_until("ready"));
  EXPECT_EQ(docker({"kill", "victim"}).out, "victim\n");
  EXPECT_EQ(victim->finish(), 128 + SIGKILL);
  EXPECT_TRUE(host_processes().empty());
  auto not_running = docker({"kill", "victim"});
  EXPECT_EQ(not_running.exit_code, 1);
  EXPECT_NE(not_running.err.find("is not running"), std::string::npos) << not_running.err;
  EXPECT_EQ(docker({"rm", "victim"}).exit_code, 0);
  EXPECT_TRUE(record("victim").is_null());

  auto doomed = docker_in_background({"run", "--name", "doomed", "ubuntu:22.04", "sh", "-c", "echo ready; sleep 1000"});
  ASSERT_TRUE(doomed->read_until("ready"));
  auto refused = docker({"rm", "doomed"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("You cannot remove a running container"), std::string::npos) << refused.err;
  EXPECT_EQ(docker({"rm", "-f", "doomed"}).exit_code, 0);
  EXPECT_EQ(doomed->finish(), 128 + SIGKILL);
  EXPECT_TRUE(record("doomed").is_null());
  EXPECT_TRUE(eventually([&] { return host_processes().empty(); }));
}

// ---------------------------------------------------------------------------------------------------------------
// conda.

TEST_F(MockCondaTest, EnvCreateRecordsTheEnvironmentThatListsShow) {
  EXPECT_EQ(conda({"--version"}).out.rfind("conda 24.", 0), 0U);
  EXPECT_EQ(conda({"info", "--base"}).out, (home / "miniconda3").string() + "\n");
  const auto file = environment_file("environment.yml", kDemoEnvironment);
  auto created = conda({"env", "create", "-f", file.string(), "-y"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  EXPECT_NE(created.out.find("conda activate demo"), std::string::npos) << created.out;

  const auto history = slurp(prefix("demo") / "conda-meta" / "history");
  EXPECT_NE(history.find("python=3.11"), std::string::npos) << history;
  EXPECT_NE(history.find("jax[tpu]==0.4.30"), std::string::npos) << history;
  const auto recorded = json::parse(slurp(prefix("demo") / "conda-meta" / "jobman-mock.json"));
  EXPECT_EQ(recorded["channels"], json::array({"conda-forge"}));
  ASSERT_EQ(recorded["dependencies"].size(), 3U);
  EXPECT_EQ(recorded["dependencies"][1]["name"], "numpy");
  EXPECT_EQ(recorded["dependencies"][2]["manager"], "pip");
  EXPECT_EQ(recorded["dependencies"][2]["name"], "jax");
  // bin/python is the host's python3 when the host has one.
  bool host_has_python = false;
  const char* path = std::getenv("PATH");
  for (const auto& entry : lines_of(std::regex_replace(path == nullptr ? "" : path, std::regex(":"), "\n"))) {
    host_has_python = host_has_python || (!entry.empty() && ::access((fs::path(entry) / "python3").c_str(), X_OK) == 0);
  }
  EXPECT_EQ(fs::is_symlink(prefix("demo") / "bin" / "python"), host_has_python);
  EXPECT_TRUE(fs::is_directory(prefix("demo") / "bin"));

  for (const auto& listing : {conda({"env", "list"}), conda({"info", "--envs"})}) {
    ASSERT_EQ(listing.exit_code, 0);
    const auto lines = lines_of(listing.out);
    ASSERT_GE(lines.size(), 4U) << listing.out;
    EXPECT_EQ(lines[0], "# conda environments:");
    EXPECT_TRUE(std::regex_match(lines[2], std::regex("base +\\* +" + (home / "miniconda3").string()))) << lines[2];
    EXPECT_TRUE(std::regex_match(lines[3], std::regex("demo +" + prefix("demo").string()))) << lines[3];
  }
}

TEST_F(MockCondaTest, AnExistingEnvironmentIsNotOverwritten) {
  const auto file = environment_file("environment.yml", kDemoEnvironment);
  ASSERT_EQ(conda({"env", "create", "-f", file.string()}).exit_code, 0);
  auto again = conda({"env", "create", "-f", file.string(), "-q"});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find("CondaValueError: prefix already exists: " + prefix("demo").string()), std::string::npos)
      << again.err;
  auto unnamed = conda({"env", "create", "-f", environment_file("unnamed.yml", "dependencies: [numpy]\n").string()});
  EXPECT_EQ(unnamed.exit_code, 1);
  EXPECT_NE(unnamed.err.find("-n NAME"), std::string::npos) << unnamed.err;
  EXPECT_EQ(conda({"env", "create", "-f", dir.path().string() + "/unnamed.yml", "-n", "other", "-q"}).exit_code, 0);
  EXPECT_TRUE(fs::is_directory(prefix("other") / "conda-meta"));
}

TEST_F(MockCondaTest, RunExecsTheCommandInTheEnvironment) {
  ASSERT_EQ(conda({"env", "create", "-f", environment_file("environment.yml", kDemoEnvironment).string()}).exit_code,
            0);
  auto run = conda({"run", "--no-capture-output", "-n", "demo", "sh", "-c",
                    "echo $CONDA_DEFAULT_ENV $CONDA_PREFIX $DEMO_SETTING; echo ${PATH%%:*}; exit 3"});
  EXPECT_EQ(run.exit_code, 3) << run.err;
  EXPECT_EQ(run.out, "demo " + prefix("demo").string() + " on\n" + (prefix("demo") / "bin").string() + "\n");
  EXPECT_EQ(conda({"run", "--live-stream", "-n", "demo", "sh", "-c", "kill -TERM $$"}).exit_code, 128 + SIGTERM)
      << "conda run execs the command, whose death is its own";

  auto missing = conda({"run", "-n", "nope", "true"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("EnvironmentLocationNotFound: Not a conda environment: " + prefix("nope").string()),
            std::string::npos)
      << missing.err;
}

TEST_F(MockCondaTest, UpdateRewritesTheRecordedDependencies) {
  ASSERT_EQ(conda({"env", "create", "-f", environment_file("environment.yml", kDemoEnvironment).string()}).exit_code,
            0);
  const auto update = environment_file("update.yml", "dependencies:\n  - numpy>=2\n  - scipy\n");
  const auto specs = [&] {
    std::vector<std::string> all;
    const auto recorded = json::parse(slurp(prefix("demo") / "conda-meta" / "jobman-mock.json"));
    for (const auto& d : recorded["dependencies"]) {
      all.push_back(d["spec"].get<std::string>());
    }
    return all;
  };
  ASSERT_EQ(conda({"env", "update", "-f", update.string(), "-n", "demo"}).exit_code, 0);
  EXPECT_EQ(specs(), (std::vector<std::string>{"python=3.11", "numpy>=2", "jax[tpu]==0.4.30", "scipy"}));
  ASSERT_EQ(conda({"env", "update", "-f", update.string(), "-n", "demo", "--prune"}).exit_code, 0);
  EXPECT_EQ(specs(), (std::vector<std::string>{"numpy>=2", "scipy"}));
  EXPECT_NE(slurp(prefix("demo") / "conda-meta" / "history").find("--prune"), std::string::npos);

  auto missing = conda({"env", "update", "-f", update.string(), "-n", "nope"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("Not a conda environment"), std::string::npos) << missing.err;
}

TEST_F(MockCondaTest, RemoveDeletesTheEnvironment) {
  const auto file = environment_file("environment.yml", kDemoEnvironment);
  ASSERT_EQ(conda({"env", "create", "-f", file.string()}).exit_code, 0);
  EXPECT_EQ(conda({"env", "remove", "-n", "demo", "-y"}).exit_code, 0);
  EXPECT_FALSE(fs::exists(prefix("demo")));
  EXPECT_EQ(conda({"env", "list"}).out.find("demo"), std::string::npos);

  ASSERT_EQ(conda({"env", "create", "-f", file.string()}).exit_code, 0);
  EXPECT_EQ(conda({"remove", "-n", "demo", "--all", "-y"}).exit_code, 0);
  EXPECT_FALSE(fs::exists(prefix("demo")));
  EXPECT_EQ(conda({"remove", "-n", "demo", "--all", "-y"}).exit_code, 1) << "nothing left to remove";
}

TEST_F(MockCondaTest, BadYamlIsReportedWithTheFileAndLine) {
  const auto file = environment_file("broken.yml", "name: demo\ndependencies:\n  - numpy\n bad: indentation\n");
  auto created = conda({"env", "create", "-f", file.string()});
  EXPECT_EQ(created.exit_code, 1);
  EXPECT_NE(created.err.find(file.string() + ", line 4"), std::string::npos) << created.err;

  const auto shape = environment_file("shape.yml", "name: demo\ndependencies:\n  - numpy\n  - {conda: scipy}\n");
  auto misshapen = conda({"env", "create", "-f", shape.string()});
  EXPECT_EQ(misshapen.exit_code, 1);
  EXPECT_NE(misshapen.err.find(shape.string() + ", line 4"), std::string::npos) << misshapen.err;
  EXPECT_FALSE(fs::exists(prefix("demo")));
}

TEST_F(MockCondaTest, AMissingPackageLeavesNoEnvironmentBehind) {
  const auto file =
      environment_file("environment.yml", "name: demo\ndependencies:\n  - numpy\n  - does-not-exist-lib\n");
  auto created = conda({"env", "create", "-f", file.string()});
  EXPECT_EQ(created.exit_code, 1);
  EXPECT_NE(created.err.find("PackagesNotFoundError: The following packages are not available from current channels"),
            std::string::npos)
      << created.err;
  EXPECT_NE(created.err.find("  - does-not-exist-lib"), std::string::npos) << created.err;
  const auto pip = environment_file("pip.yml", "name: demo\ndependencies:\n  - pip:\n    - does-not-exist-wheel\n");
  auto pip_created = conda({"env", "create", "-f", pip.string()});
  EXPECT_EQ(pip_created.exit_code, 1);
  EXPECT_NE(pip_created.err.find("CondaEnvException: Pip failed"), std::string::npos) << pip_created.err;
  EXPECT_FALSE(fs::exists(prefix("demo")));
  const auto envs = home / "miniconda3" / "envs";
  EXPECT_TRUE(!fs::exists(envs) || fs::is_empty(envs)) << "no half-built environment is left either";
}

TEST_F(MockCondaTest, UnknownSubcommandsAndOptionsExit2) {
  auto unknown = conda({"frobnicate"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("'frobnicate'"), std::string::npos) << unknown.err;
  auto unknown_env = conda({"env", "export"});
  EXPECT_EQ(unknown_env.exit_code, 2);
  EXPECT_NE(unknown_env.err.find("'export'"), std::string::npos) << unknown_env.err;
  auto option = conda({"env", "create", "--bogus"});
  EXPECT_EQ(option.exit_code, 2);
  EXPECT_NE(option.err.find("--bogus"), std::string::npos) << option.err;
}

} // namespace docker_conda_test
