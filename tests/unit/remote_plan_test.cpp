// The remote layer's pure parts: gcloud argv, the setup plan, the command in its environment, workload names.
#include "jobman/config/loader.hpp"
#include "jobman/remote/gcloud.hpp"
#include "jobman/remote/setup.hpp"
#include "jobman/remote/workload.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "support/run.hpp"
#include "support/scoped_env.hpp"
#include "support/temp_dir.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <gtest/gtest.h>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace remote_plan_test {

namespace fs = std::filesystem;
using jobman::config::EnvType;
using jobman::config::JobConfig;
using jobman::remote::shell_quote;
using jobman::test::TempDir;

// Text that runs `touch PWNED` in every way a shell could be tricked into it.
std::string hostile() {
  return "a'b\"c $(touch PWNED) `touch PWNED` ;\necho $HOME \\";
}

// hostile() without its newline: what one env-file line can hold.
std::string one_line_hostile() {
  auto text = hostile();
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

// The message of the jobman::Error `action` throws, or "(no error)".
template <typename Action> std::string error_of(Action&& action) {
  try {
    std::forward<Action>(action)();
  } catch (const jobman::Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Writes `content` to `name` in `dir` with mode 0755 and returns its path.
fs::path write_executable(const TempDir& dir, const std::string& name, const std::string& content) {
  auto path = dir.write(name, content);
  fs::permissions(path, static_cast<fs::perms>(0755));
  return path;
}

// Puts a program `name` first on PATH (in dir/bin) that prints each argument followed by a NUL; "info" just succeeds.
void fake_printing_program(const TempDir& dir, const std::string& name) {
  write_executable(dir, "bin/" + name, "#!/bin/bash\n[ \"$1\" = info ] && exit 0\nprintf '%s\\0' \"$@\"\n");
}

// Runs `text` as the script dir/run.sh, as a workload runs (bash in `dir`, dir/bin first on PATH, plus `env`), and
// splits what it printed at NULs.
std::vector<std::string> printed_argv(const TempDir& dir, const std::string& text,
                                      std::map<std::string, std::string> env = {}) {
  const char* path = std::getenv("PATH");
  env["PATH"] = (dir / "bin").string() + ":" + (path != nullptr ? path : "/usr/bin:/bin");
  const auto script = dir.write("run.sh", text);
  const auto result = jobman::test::run_program({"/bin/bash", script.string()}, {env, "", dir.path().string()});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  std::vector<std::string> words;
  std::size_t start = 0;
  for (std::size_t end = result.out.find('\0'); end != std::string::npos; end = result.out.find('\0', start)) {
    words.push_back(result.out.substr(start, end - start));
    start = end + 1;
  }
  return words;
}

// The eight JOBMAN_* names docker passes into the container, each after -e.
std::vector<std::string> passed_jobman_names() {
  std::vector<std::string> out;
  for (const char* name :
       {"JOBMAN_JOB_ID", "JOBMAN_ATTEMPT", "JOBMAN_RESUME", "JOBMAN_WORKER_ID", "JOBMAN_NUM_WORKERS", "JOBMAN_SLICE_ID",
        "JOBMAN_NUM_SLICES", "JOBMAN_TPU_NAME", "JOBMAN_ZONE", "JOBMAN_ACCELERATOR", "MEGASCALE_NUM_SLICES",
        "MEGASCALE_SLICE_ID", "MEGASCALE_COORDINATOR_ADDRESS", "MEGASCALE_PORT"}) {
    out.insert(out.end(), {"-e", name});
  }
  return out;
}

// This machine's PATH.
std::string system_path() {
  const char* path = std::getenv("PATH");
  return path != nullptr ? path : "/usr/bin:/bin";
}

// The programs a setup script and the stand-ins below run, besides those a test stands in for.
const std::vector<std::string> kScriptTools = {"awk",  "cat",   "chmod", "cmp", "cp",        "cut",
                                               "grep", "mkdir", "mv",    "rm",  "sha256sum", "stat"};

// Links this machine's `tools` into dir/bin, so that a script whose PATH is dir/bin alone finds them and no other
// program of this machine.
void link_tools(const TempDir& dir, const std::vector<std::string>& tools) {
  fs::create_directories(dir / "bin");
  for (const auto& tool : tools) {
    for (const fs::path where : {"/usr/bin", "/bin"}) {
      if (fs::exists(where / tool)) {
        fs::create_symlink(where / tool, dir / "bin" / tool);
        break;
      }
    }
  }
}

// Runs `plan`'s script as a worker runs it, with `shell`, in `dir`, with HOME dir/home (whose ~/.jobman/files holds
// the plan's files, as the setup sends them: copies of local files, and those made from text written out), PATH
// `path` and `input` on its stdin.
jobman::test::RunResult run_plan(const TempDir& dir, const jobman::remote::SetupPlan& plan, const std::string& path,
                                 const std::string& shell = "/bin/bash", const std::string& input = "") {
  fs::create_directories(dir / "home/.jobman/files");
  for (const auto& file : plan.files) {
    const auto sent = dir / "home/.jobman/files" / file.remote_name;
    if (file.local_path.empty()) {
      dir.write("home/.jobman/files/" + file.remote_name, file.content);
    } else {
      fs::copy_file(file.local_path, sent, fs::copy_options::overwrite_existing);
    }
  }
  return jobman::test::run_program({shell, "-c", plan.script},
                                   {{{"HOME", (dir / "home").string()}, {"PATH", path}}, input, dir.path().string()});
}

// The lines of dir/calls, where the stand-ins below record how they were run.
std::vector<std::string> calls(const TempDir& dir) {
  auto lines = jobman::util::split(jobman::test::file_text(dir / "calls"), '\n');
  if (!lines.empty() && lines.back().empty()) {
    lines.pop_back();
  }
  return lines;
}

// A stand-in Python `name` of `version` in dir/bin, recording "PATH ARGS" in dir/calls: `-c CODE` prints the version
// and `-m venv DIR` makes DIR a venv of it (bin/python, a copy of this program, and bin/activate); while
// dir/no-venv-NAME exists it fails instead, as Ubuntu's Python without its pythonX.Y-venv package, leaving the venv
// half-made (bin/python only).
void fake_python(const TempDir& dir, const std::string& name, const std::string& version) {
  write_executable(dir, "bin/" + name,
                   "#!/bin/sh\necho \"$0 $*\" >> " + shell_quote((dir / "calls").string()) +
                       "\ncase \"$1\" in\n-c) echo " + version +
                       " ;;\n-m)\n  [ \"$2\" = venv ] || exit 0\n"
                       "  mkdir -p \"$3/bin\" && cp \"$0\" \"$3/bin/python\" || exit 1\n"
                       "  if [ -e " +
                       shell_quote((dir / ("no-venv-" + name)).string()) +
                       " ]; then echo 'ensurepip is not available' >&2; exit 1; fi\n"
                       "  : > \"$3/bin/activate\" ;;\nesac\n");
}

// A stand-in sudo (which runs its command, -n aside) and apt-get (whose `install` of NAME-venv removes
// dir/no-venv-NAME) in dir/bin, both recording their arguments in dir/calls.
void fake_sudo_and_apt_get(const TempDir& dir) {
  const auto record = shell_quote((dir / "calls").string());
  write_executable(dir, "bin/sudo",
                   "#!/bin/sh\necho \"sudo $*\" >> " + record + "\n[ \"$1\" = -n ] && shift\nexec \"$@\"\n");
  write_executable(dir, "bin/apt-get",
                   "#!/bin/sh\necho \"apt-get $*\" >> " + record +
                       "\n[ \"$1\" = install ] || exit 0\nfor package in \"$@\"; do rm -f " +
                       shell_quote((dir / "no-venv-").string()) + "\"${package%-venv}\"; done\n");
}

// A stand-in conda in dir/bin, recording its arguments in dir/calls: `env list` lists base and the lines of dir/envs,
// `env create -n NAME ...` adds NAME to them, and `tos ...` fails as a conda without that command fails.
void fake_conda(const TempDir& dir) {
  const auto envs = shell_quote((dir / "envs").string());
  write_executable(dir, "bin/conda",
                   "#!/bin/sh\necho \"$*\" >> " + shell_quote((dir / "calls").string()) +
                       "\ncase \"$1 $2\" in\n'env list') echo '# conda environments:'; echo 'base  /c'; cat " + envs +
                       " 2> /dev/null ;;\n'env create') echo \"$4  /c/envs/$4\" >> " + envs +
                       " ;;\n'tos '*) echo \"conda: error: argument COMMAND: invalid choice: 'tos'\" >&2; exit 2 ;;\n"
                       "esac\n");
}

TEST(RemoteScpArgv, SourcesComeBeforeTheUserNodePathAndTheCommonFlags) {
  const jobman::remote::SliceTarget target{"/opt/gcloud", "proj", "us-central2-b", "job-7-a1", "alice", "/k/id", {}};
  EXPECT_EQ(jobman::remote::scp_argv(target, 2, {"/tmp/a b", "/tmp/c"}, ".jobman/files"),
            (std::vector<std::string>{"/opt/gcloud", "compute", "tpus", "tpu-vm", "scp", "/tmp/a b", "/tmp/c",
                                      "alice@job-7-a1:.jobman/files", "--zone=us-central2-b", "--project=proj",
                                      "--worker=2", "--ssh-key-file=/k/id", "--quiet"}));
  const jobman::remote::SliceTarget plain{"gcloud", "", "europe-west4-a", "n", "", "", {}};
  EXPECT_EQ(jobman::remote::scp_argv(plain, 0, {"f"}, "/abs"),
            (std::vector<std::string>{"gcloud", "compute", "tpus", "tpu-vm", "scp", "f", "n:/abs",
                                      "--zone=europe-west4-a", "--worker=0", "--quiet"}));
}

TEST(RemoteSshArgv, AKeyFileGoesBeforeQuietAndTheCommandStaysLast) {
  const jobman::remote::SliceTarget target{"gcloud", "proj", "us-central2-b", "node", "", "/home/u/.ssh/jobman key",
                                           {}};
  EXPECT_EQ(jobman::remote::ssh_argv(target, 1, "true"),
            (std::vector<std::string>{"gcloud", "compute", "tpus", "tpu-vm", "ssh", "node", "--zone=us-central2-b",
                                      "--project=proj", "--worker=1", "--ssh-key-file=/home/u/.ssh/jobman key",
                                      "--quiet", "--command=true"}));
}

TEST(RemoteGcloudArgv, KnownHostKeysAreCheckedStrictlyAndAPortOtherThan22IsGivenToSshAndScp) {
  jobman::remote::SliceTarget target{"gcloud", "proj", "us-central2-b", "node", "", "/k/id", {}};
  target.hosts = {{"127.130.0.1", 22, ""}, {"127.130.0.2", 2222, ""}};
  target.host_keys_known = true;
  EXPECT_EQ(jobman::remote::ssh_argv(target, 0, "true"),
            (std::vector<std::string>{"gcloud", "compute", "tpus", "tpu-vm", "ssh", "node", "--zone=us-central2-b",
                                      "--project=proj", "--worker=0", "--ssh-key-file=/k/id",
                                      "--strict-host-key-checking=yes", "--quiet", "--command=true"}));
  // gcloud splits an --ssh-flag at its spaces; it passes each --scp-flag to scp as one argument.
  EXPECT_EQ(jobman::remote::shell_argv(target, 1),
            (std::vector<std::string>{"gcloud", "compute", "tpus", "tpu-vm", "ssh", "node", "--zone=us-central2-b",
                                      "--project=proj", "--worker=1", "--ssh-key-file=/k/id",
                                      "--strict-host-key-checking=yes", "--ssh-flag=-p 2222", "--quiet"}));
  EXPECT_EQ(
      jobman::remote::scp_argv(target, 1, {"f"}, "d"),
      (std::vector<std::string>{"gcloud", "compute", "tpus", "tpu-vm", "scp", "f", "node:d", "--zone=us-central2-b",
                                "--project=proj", "--worker=1", "--ssh-key-file=/k/id",
                                "--strict-host-key-checking=yes", "--scp-flag=-P", "--scp-flag=2222", "--quiet"}));
  // Keys not known: gcloud's own default; a worker beyond the known hosts: no port.
  target.host_keys_known = false;
  EXPECT_EQ(
      jobman::remote::ssh_argv(target, 3, "true"),
      (std::vector<std::string>{"gcloud", "compute", "tpus", "tpu-vm", "ssh", "node", "--zone=us-central2-b",
                                "--project=proj", "--worker=3", "--ssh-key-file=/k/id", "--quiet", "--command=true"}));
}

TEST(RemotePathExpr, TildeIsTheRemoteHomeAndEverythingElseIsQuoted) {
  using jobman::remote::remote_path_expr;
  EXPECT_EQ(remote_path_expr("~"), "\"$HOME\"");
  EXPECT_EQ(remote_path_expr("~/x y"), "\"$HOME\"/'x y'");
  EXPECT_EQ(remote_path_expr("/abs/p'q"), "'/abs/p'\\''q'");
  EXPECT_EQ(remote_path_expr("rel/dir"), "'rel/dir'");
  EXPECT_EQ(remote_path_expr("~other/x"), "'~other/x'");
  const auto result = jobman::test::run_program(
      {"/bin/bash", "-c", "printf '%s|' " + remote_path_expr("~") + " " + remote_path_expr("~/x $(y)")},
      {{{"HOME", "/home/w w"}}, "", ""});
  EXPECT_EQ(result.out, "/home/w w|/home/w w/x $(y)|");
}

// A config with an ssh identity (key and public key), a gcsfuse mount and every environment section.
JobConfig full_config(const TempDir& dir) {
  JobConfig config;
  config.job.name = "demo";
  config.ssh = jobman::config::SshSection{"", {{dir.write("id key+1", "abc").string(), "", ""}}};
  config.gcsfuse = jobman::config::GcsfuseSection{"bucket", "~/mnt", {}, std::nullopt, {}};
  config.venv = jobman::config::VenvSection{"env", "", "3.10"};
  config.conda = jobman::config::CondaSection{"env", ""};
  config.docker = jobman::config::DockerSection{"img:tag", {}, {}, {}, ""};
  return config;
}

TEST(RemotePlanSetup, ModulesRunSshThenGcsfuseThenOnlyTheConfiguredEnvironment) {
  const TempDir dir;
  auto config = full_config(dir);
  for (const auto& [env, name] : std::vector<std::pair<EnvType, std::string>>{
           {EnvType::venv, "venv"}, {EnvType::conda, "conda"}, {EnvType::docker, "docker"}}) {
    config.job.env_type = env;
    const auto plan = jobman::remote::plan_setup(config);
    EXPECT_EQ(plan.modules, (std::vector<std::string>{"ssh", "gcsfuse", name}));
    EXPECT_TRUE(
        plan.script.ends_with("jobman_run_module ssh\njobman_run_module gcsfuse\njobman_run_module " + name + "\n"))
        << plan.script;
    for (const std::string other : {"venv", "conda", "docker"}) {
      EXPECT_EQ(plan.script.find("jobman_setup_" + other + "()") != std::string::npos, other == name) << other;
    }
  }
  config.job.env_type = EnvType::none;
  EXPECT_EQ(jobman::remote::plan_setup(config).modules, (std::vector<std::string>{"ssh", "gcsfuse"}));
  const JobConfig bare;
  const auto empty = jobman::remote::plan_setup(bare);
  EXPECT_TRUE(empty.modules.empty());
  EXPECT_TRUE(empty.files.empty());
  EXPECT_EQ(empty.script.find("\njobman_run_module "), std::string::npos);
}

TEST(RemotePlanSetup, FilesAreNamedByTheirContentAndListedOnce) {
  const TempDir dir;
  const jobman::test::ScopedEnv home("HOME", dir.path().string());
  dir.write("keys/id key+1", "abc");
  dir.write("keys/id key+1.pub", "ssh-ed25519 AAAA");
  JobConfig config;
  config.ssh = jobman::config::SshSection{
      "", {{"~/keys/id key+1", "~/keys/id key+1.pub", ""}, {(dir / "keys/id key+1").string(), "", ""}}};
  const auto plan = jobman::remote::plan_setup(config);
  ASSERT_EQ(plan.files.size(), 2U);
  const std::string abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
  EXPECT_EQ(plan.files[0].local_path, (dir / "keys/id key+1").string());
  EXPECT_EQ(plan.files[0].sha256, abc);
  EXPECT_EQ(plan.files[0].remote_name, abc + "-id_key_1");
  EXPECT_EQ(plan.files[1].local_path, (dir / "keys/id key+1.pub").string());
  EXPECT_EQ(plan.files[1].remote_name, plan.files[1].sha256 + "-id_key_1.pub");
  EXPECT_NE(plan.script.find("jobman_install '" + abc + "-id_key_1' \"$HOME/.ssh\"/'id key+1' 600"), std::string::npos)
      << plan.script;
}

// plan_setup's error for `config`, or "(no error)".
std::string setup_error(const JobConfig& config) {
  return error_of([&] { jobman::remote::plan_setup(config); });
}

TEST(RemotePlanSetup, AMissingLocalFileIsNotSentAndIsNeededOnlyWhereTheVenvMustBeMade) {
  const TempDir dir;
  const auto missing = (dir / "missing.txt").string();
  JobConfig config;
  config.job.env_type = EnvType::venv;
  config.venv = jobman::config::VenvSection{"env", missing, ""};
  const auto plan = jobman::remote::plan_setup(config);
  EXPECT_TRUE(plan.files.empty());
  const auto venv = (dir / "home/venvs/env").string();
  const auto absent = run_plan(dir, plan, system_path());
  EXPECT_EQ(absent.exit_code, 1);
  EXPECT_NE(absent.out.find("jobman-setup: venv failed"), std::string::npos) << absent.out;
  EXPECT_NE(absent.err.find("jobman: venv.requirements_file " + missing +
                            " does not exist on this machine, and the venv " + venv + " must be made from it"),
            std::string::npos)
      << absent.err;
  // A worker that has the venv uses it as it is.
  write_executable(dir, "home/venvs/env/bin/python", "#!/bin/sh\n");
  dir.write("home/venvs/env/bin/activate", "");
  const auto present = run_plan(dir, plan, system_path());
  EXPECT_EQ(present.exit_code, 0) << present.err;
  EXPECT_NE(present.out.find("jobman: venv.requirements_file " + missing + " does not exist on this machine; using " +
                             "the venv " + venv + " as it is\njobman-setup: venv unchanged"),
            std::string::npos)
      << present.out;
}

TEST(RemotePlanSetup, AMissingCondaFileIsNeededOnlyWhereTheEnvironmentMustBeCreated) {
  const TempDir dir;
  const auto missing = (dir / "env.yaml").string();
  fake_conda(dir);
  JobConfig config;
  config.job.env_type = EnvType::conda;
  config.conda = jobman::config::CondaSection{"ml", missing};
  const auto plan = jobman::remote::plan_setup(config);
  EXPECT_TRUE(plan.files.empty());
  const auto path = (dir / "bin").string() + ":" + system_path();
  const auto absent = run_plan(dir, plan, path);
  EXPECT_EQ(absent.exit_code, 1);
  EXPECT_NE(absent.out.find("jobman-setup: conda failed"), std::string::npos) << absent.out;
  EXPECT_NE(absent.err.find("jobman: conda.config_file " + missing +
                            " does not exist on this machine, and the conda environment ml must be created from it"),
            std::string::npos)
      << absent.err;
  EXPECT_EQ(calls(dir), std::vector<std::string>{"env list"});
  dir.write("envs", "ml  /c/envs/ml\n");
  const auto present = run_plan(dir, plan, path);
  EXPECT_EQ(present.exit_code, 0) << present.err;
  EXPECT_NE(present.out.find("jobman: conda.config_file " + missing +
                             " does not exist on this machine; using the conda environment ml as it is\n"
                             "jobman-setup: conda unchanged"),
            std::string::npos)
      << present.out;
}

TEST(RemotePlanSetup, AMissingKeyFileIsNeededOnlyWhereTheWorkerLacksTheKey) {
  const TempDir dir;
  const auto key = (dir / "keys/id_lab").string();
  const auto pub = (dir / "keys/id_lab.pub").string();
  JobConfig config;
  config.ssh = jobman::config::SshSection{"", {{key, pub, ""}}};
  const auto plan = jobman::remote::plan_setup(config);
  EXPECT_TRUE(plan.files.empty());
  const auto absent = run_plan(dir, plan, system_path());
  EXPECT_EQ(absent.exit_code, 1);
  EXPECT_NE(absent.err.find("jobman: ssh.identities[0].private_key " + key +
                            " does not exist on this machine, and this worker has no " +
                            (dir / "home/.ssh/id_lab").string()),
            std::string::npos)
      << absent.err;
  // The keys an earlier setup left on the worker are kept, and the public one is accepted.
  dir.write("home/.ssh/id_lab", "key\n");
  dir.write("home/.ssh/id_lab.pub", "ssh-ed25519 AAAA lab\n");
  const auto present = run_plan(dir, plan, system_path());
  EXPECT_EQ(present.exit_code, 0) << present.err;
  EXPECT_NE(present.out.find("jobman: ssh.identities[0].private_key " + key + " does not exist on this machine; " +
                             "keeping " + (dir / "home/.ssh/id_lab").string() + " on this worker"),
            std::string::npos)
      << present.out;
  EXPECT_NE(present.out.find("jobman: ssh.identities[0].public_key " + pub + " does not exist on this machine; " +
                             "keeping " + (dir / "home/.ssh/id_lab.pub").string() + " on this worker"),
            std::string::npos)
      << present.out;
  EXPECT_EQ(fs::status(dir / "home/.ssh/id_lab").permissions(), fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(jobman::test::file_text(dir / "home/.ssh/authorized_keys"), "ssh-ed25519 AAAA lab\n");
}

TEST(RemotePlanSetup, AMissingFilesHostileNameIsPrintedAsItIs) {
  const TempDir dir;
  const auto key = (dir / hostile()).string();
  JobConfig config;
  config.ssh = jobman::config::SshSection{"", {{key, "", ""}}};
  const auto result = run_plan(dir, jobman::remote::plan_setup(config), system_path());
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("jobman: ssh.identities[0].private_key " + key + " does not exist on this machine"),
            std::string::npos)
      << result.err;
  EXPECT_FALSE(fs::exists(dir / "PWNED"));
  EXPECT_FALSE(fs::exists(dir / "home/PWNED"));
}

TEST(RemotePlanSetup, ADirectoryGivenAsAKeyFileIsAnError) {
  const TempDir dir;
  JobConfig config;
  config.ssh = jobman::config::SshSection{"", {{dir.path().string(), "", ""}}};
  const auto message = setup_error(config);
  EXPECT_TRUE(message.starts_with("ssh.identities[0].private_key: ")) << message;
}

TEST(RemotePlanSetup, HostileConfigTextOnlyEverAppearsAsQuotedWords) {
  const TempDir dir;
  JobConfig config;
  const auto key = dir.write(hostile(), "abc").string();
  dir.write(hostile() + ".pub", "ssh-ed25519 AAAA");
  config.ssh = jobman::config::SshSection{"", {{key, key + ".pub", hostile()}}};
  config.gcsfuse = jobman::config::GcsfuseSection{
      hostile(), "/mnt/" + hostile(), {"--o=$(touch PWNED)", "--uid `id`"}, std::nullopt, {}};
  config.venv = jobman::config::VenvSection{hostile(), "", ""};
  config.conda = jobman::config::CondaSection{hostile(), dir.write("env.yaml", "name: x\n").string()};
  config.docker = jobman::config::DockerSection{hostile(), {}, {}, {}, ""};
  const std::vector<std::string> quoted = {
      "gcsfuse '--o=$(touch' 'PWNED)' '--uid' '`id`' --prometheus-port=9447 " + shell_quote(hostile()),
      jobman::remote::remote_path_expr("/mnt/" + hostile()),
      shell_quote(hostile() + ".pub"),
      shell_quote(hostile()),
  };
  for (const auto env : {EnvType::venv, EnvType::conda, EnvType::docker}) {
    config.job.env_type = env;
    const auto plan = jobman::remote::plan_setup(config);
    ASSERT_EQ(plan.modules.size(), 3U);
    const auto check = jobman::test::run_program({"/bin/bash", "-n"}, {{}, plan.script, ""});
    EXPECT_EQ(check.exit_code, 0) << check.err << plan.script;
    std::string rest = plan.script;
    for (const auto& word : quoted) {
      EXPECT_NE(rest.find(word), std::string::npos) << word << "\n" << plan.script;
      for (auto at = rest.find(word); at != std::string::npos; at = rest.find(word)) {
        rest.erase(at, word.size());
      }
    }
    EXPECT_EQ(rest.find("touch PWNED"), std::string::npos) << "unquoted config text:\n" << rest;
    EXPECT_EQ(rest.find("`id`"), std::string::npos) << "unquoted config text:\n" << rest;
  }
}

TEST(RemotePlanSetup, GcsfuseMountsOpenToAllUnlessTheConfigGivesFlagsAndServesItsMetrics) {
  JobConfig config;
  config.gcsfuse = jobman::config::GcsfuseSection{"bucket", "~/mnt", {}, std::nullopt, {}};
  const auto plain = jobman::remote::plan_setup(config).script;
  EXPECT_NE(plain.find("\n  gcsfuse --implicit-dirs --dir-mode=777 --file-mode=777 --kernel-list-cache-ttl-secs=-1 "
                       "--metadata-cache-ttl-secs=-1 --stat-cache-max-size-mb=-1 --type-cache-max-size-mb=-1 "
                       "--prometheus-port=9447 'bucket' \"$mp\" || return 1\n"),
            std::string::npos)
      << plain;
  EXPECT_EQ(config.gcsfuse->metrics_port(), 9447);
  config.gcsfuse->flags = {"--implicit-dirs", "--uid 1000"};
  const auto own = jobman::remote::plan_setup(config).script;
  EXPECT_NE(own.find("\n  gcsfuse '--implicit-dirs' '--uid' '1000' --prometheus-port=9447 'bucket' \"$mp\" || return "
                     "1\n"),
            std::string::npos)
      << own;
  EXPECT_EQ(own.find("--dir-mode"), std::string::npos) << own;
  // A port of the config's own is kept, and read from; 0 turns the metrics off.
  config.gcsfuse->flags = {"--implicit-dirs --prometheus-port 9100"};
  const auto port = jobman::remote::plan_setup(config).script;
  EXPECT_NE(port.find("\n  gcsfuse '--implicit-dirs' '--prometheus-port' '9100' 'bucket' \"$mp\""), std::string::npos)
      << port;
  EXPECT_EQ(config.gcsfuse->metrics_port(), 9100);
  config.gcsfuse->flags = {"--prometheus-port=0"};
  EXPECT_EQ(config.gcsfuse->metrics_port(), 0);
}

// A config whose environment is the venv `name`, made with `python` from `requirements`.
JobConfig venv_config(const std::string& name, const std::string& requirements, const std::string& python) {
  JobConfig config;
  config.job.env_type = EnvType::venv;
  config.venv = jobman::config::VenvSection{name, requirements, python};
  return config;
}

TEST(RemoteVenvSetup, WithoutAPythonNamedTheVenvIsMadeWithPython310WhereTheWorkerHasItElsePython3) {
  for (const bool has_310 : {true, false}) {
    const TempDir dir;
    link_tools(dir, kScriptTools);
    fake_python(dir, "python3", "3.8");
    if (has_310) {
      fake_python(dir, "python3.10", "3.10");
    }
    const std::string python = has_310 ? "python3.10" : "python3";
    const auto venv = (dir / "home/venvs/env").string();
    const auto result = run_plan(dir, jobman::remote::plan_setup(venv_config("env", "", "")), (dir / "bin").string());
    EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
    EXPECT_EQ(calls(dir), std::vector<std::string>{(dir / "bin" / python).string() + " -m venv " + venv}) << python;
    EXPECT_NE(result.out.find("created " + venv + " with " + python + "\n"), std::string::npos) << result.out;
  }
}

TEST(RemoteVenvSetup, APythonWithoutItsVenvPackageGetsItFromAptAndTheVenvIsMadeAgain) {
  const TempDir dir;
  link_tools(dir, kScriptTools);
  fake_python(dir, "python3.10", "3.10");
  fake_sudo_and_apt_get(dir);
  dir.write("no-venv-python3.10", "");
  const auto plan = jobman::remote::plan_setup(venv_config("env", "", "3.10"));
  const auto venv = (dir / "home/venvs/env").string();
  const auto make = (dir / "bin/python3.10").string() + " -m venv " + venv;
  const auto first = run_plan(dir, plan, (dir / "bin").string());
  EXPECT_EQ(first.exit_code, 0) << first.out << first.err;
  EXPECT_NE(first.out.find("jobman-setup: venv changed"), std::string::npos) << first.out;
  EXPECT_EQ(calls(dir), (std::vector<std::string>{make, "sudo -n apt-get install -y python3.10-venv",
                                                  "apt-get install -y python3.10-venv", make}));
  EXPECT_TRUE(fs::exists(dir / "home/venvs/env/bin/activate"));
  // Set up, the worker is left alone.
  const auto second = run_plan(dir, plan, (dir / "bin").string());
  EXPECT_EQ(second.exit_code, 0) << second.err;
  EXPECT_NE(second.out.find("jobman-setup: venv unchanged"), std::string::npos) << second.out;
  EXPECT_EQ(calls(dir).size(), 4U);
}

TEST(RemoteVenvSetup, AVenvThatCannotGetItsVenvPackageFailsAndLeavesNothingHalfMade) {
  const TempDir dir;
  link_tools(dir, kScriptTools);
  fake_python(dir, "python3.10", "3.10");
  dir.write("no-venv-python3.10", ""); // And no sudo.
  const auto result = run_plan(dir, jobman::remote::plan_setup(venv_config("env", "", "3.10")), (dir / "bin").string());
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.out.find("jobman-setup: venv failed"), std::string::npos) << result.out;
  EXPECT_NE(result.err.find("cannot install python3.10-venv, which python3.10 needs to make a venv"), std::string::npos)
      << result.err;
  EXPECT_FALSE(fs::exists(dir / "home/venvs/env")) << "a half-made venv would pass for a made one";
}

TEST(RemoteVenvSetup, AVenvAtHomeSlashNameIsUsedRatherThanOneMadeInVenvs) {
  const TempDir dir;
  link_tools(dir, kScriptTools);
  fake_python(dir, "python3.10", "3.10");
  fake_python(dir, "python3.11", "3.11");
  // The venv the Python jobman made: ~/env.
  fs::create_directories(dir / "home/env/bin");
  fs::copy_file(dir / "bin/python3.10", dir / "home/env/bin/python");
  dir.write("home/env/bin/activate", "");
  const auto requirements = dir.write("requirements.txt", "numpy\n").string();
  const auto plan = jobman::remote::plan_setup(venv_config("env", requirements, "3.10"));
  ASSERT_EQ(plan.files.size(), 1U);
  const auto first = run_plan(dir, plan, (dir / "bin").string());
  EXPECT_EQ(first.exit_code, 0) << first.out << first.err;
  const auto made = calls(dir);
  EXPECT_EQ(std::count_if(made.begin(), made.end(),
                          [](const std::string& call) { return call.find(" -m venv ") != std::string::npos; }),
            0);
  EXPECT_NE(std::find(made.begin(), made.end(),
                      (dir / "home/env/bin/python").string() + " -m pip install -r " +
                          (dir / "home/.jobman/files" / plan.files[0].remote_name).string()),
            made.end());
  EXPECT_FALSE(fs::exists(dir / "home/venvs"));
  const auto second = run_plan(dir, plan, (dir / "bin").string());
  EXPECT_NE(second.out.find("jobman-setup: venv unchanged"), std::string::npos) << second.out;
  // Made with another Python than the config names, it is still not jobman's to remove.
  const auto other =
      run_plan(dir, jobman::remote::plan_setup(venv_config("env", requirements, "3.11")), (dir / "bin").string());
  EXPECT_EQ(other.exit_code, 0) << other.err;
  EXPECT_NE(
      other.out.find((dir / "home/env").string() + " was made with another Python than python3.11; using it as it is"),
      std::string::npos)
      << other.out;
  EXPECT_TRUE(fs::exists(dir / "home/env/bin/activate"));
}

TEST(RemoteCondaSetup, TheDefaultChannelsTermsAreAcceptedBeforeTheEnvironmentIsCreated) {
  const TempDir dir;
  fake_conda(dir);
  JobConfig config;
  config.job.env_type = EnvType::conda;
  config.conda = jobman::config::CondaSection{"ml", dir.write("env.yaml", "name: ml\n").string()};
  const auto plan = jobman::remote::plan_setup(config);
  ASSERT_EQ(plan.files.size(), 1U);
  const auto path = (dir / "bin").string() + ":" + system_path();
  // This conda has no `tos` command, as an older conda: the setup goes on.
  const auto first = run_plan(dir, plan, path);
  EXPECT_EQ(first.exit_code, 0) << first.out << first.err;
  EXPECT_NE(first.out.find("jobman-setup: conda changed"), std::string::npos) << first.out;
  EXPECT_EQ(
      calls(dir),
      (std::vector<std::string>{
          "env list",
          "tos accept --override-channels -c https://repo.anaconda.com/pkgs/main -c https://repo.anaconda.com/pkgs/r",
          "env create -n ml -f " + (dir / "home/.jobman/files" / plan.files[0].remote_name).string()}));
  const auto second = run_plan(dir, plan, path);
  EXPECT_NE(second.out.find("jobman-setup: conda unchanged"), std::string::npos) << second.out;
  EXPECT_EQ(calls(dir).size(), 4U) << "only the environments are listed again";
}

// A config whose only setup is the script `text`.
JobConfig script_config(const std::string& text) {
  JobConfig config;
  config.setup = jobman::config::SetupSection{text, ""};
  return config;
}

// The plan's file made from setup.script, or nullptr.
const jobman::remote::SetupFile* script_file(const jobman::remote::SetupPlan& plan) {
  const auto it = std::find_if(plan.files.begin(), plan.files.end(), [](const jobman::remote::SetupFile& file) {
    return file.remote_name.ends_with("-setup-script.sh");
  });
  return it == plan.files.end() ? nullptr : &*it;
}

TEST(RemoteSetupScript, IsSentAsAFileNamedByItsContentAndRunsLastAfterTheEnvironment) {
  const TempDir dir;
  auto config = full_config(dir);
  config.setup = jobman::config::SetupSection{"true\n", ""};
  for (const auto& [env, name] : std::vector<std::pair<EnvType, std::string>>{
           {EnvType::venv, "venv"}, {EnvType::conda, "conda"}, {EnvType::docker, "docker"}}) {
    config.job.env_type = env;
    const auto plan = jobman::remote::plan_setup(config);
    EXPECT_EQ(plan.modules, (std::vector<std::string>{"ssh", "gcsfuse", name, "script"}));
    EXPECT_TRUE(plan.script.ends_with("jobman_run_module " + name + "\njobman_run_module script\n")) << plan.script;
    const auto* file = script_file(plan);
    ASSERT_NE(file, nullptr) << name;
    EXPECT_EQ(file->local_path, "") << "made from the config's text, not a local file";
    EXPECT_EQ(file->content, "true\n");
    EXPECT_EQ(file->sha256, "a17fcf0a2f50e2d495e4f90ce263410edc183add6c62699a2facbccf60410f74");
    EXPECT_EQ(file->remote_name, file->sha256 + "-setup-script.sh");
    EXPECT_NE(plan.script.find("  jobman_verify '" + file->remote_name + "' || return 1\n"), std::string::npos)
        << plan.script;
    const auto check = jobman::test::run_program({"/bin/bash", "-n"}, {{}, plan.script, ""});
    EXPECT_EQ(check.exit_code, 0) << check.err << plan.script;
  }
  config.job.env_type = EnvType::none;
  EXPECT_EQ(jobman::remote::plan_setup(config).modules, (std::vector<std::string>{"ssh", "gcsfuse", "script"}));
  const auto alone = jobman::remote::plan_setup(script_config("true\n"));
  EXPECT_EQ(alone.modules, std::vector<std::string>{"script"});
  ASSERT_EQ(alone.files.size(), 1U);
  // Another script is another file.
  const auto other = jobman::remote::plan_setup(script_config("false\n"));
  ASSERT_EQ(other.files.size(), 1U);
  EXPECT_NE(other.files[0].remote_name, alone.files[0].remote_name);
}

TEST(RemoteSetupScript, RunsWithBashFromHomeWithoutStdinAndReportsChangedAtEverySetup) {
  const TempDir dir;
  const auto plan = jobman::remote::plan_setup(
      script_config("echo \"script in $PWD\"\necho ran >> runs\n"
                    "if read -r line; then echo \"stdin: $line\"; else echo 'stdin is empty'; fi\n"));
  // The modules' text is POSIX shell: /bin/sh runs it as a login shell would.
  const auto first = run_plan(dir, plan, system_path(), "/bin/sh", "not for the script\n");
  EXPECT_EQ(first.exit_code, 0) << first.out << first.err;
  EXPECT_NE(first.out.find("script in " + (dir / "home").string() + "\n"), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("stdin is empty\njobman-setup: script changed\n"), std::string::npos) << first.out;
  EXPECT_EQ(jobman::test::file_text(dir / "home/runs"), "ran\n");
  // The script is the user's: it runs at every setup, and never reports unchanged.
  const auto second = run_plan(dir, plan, system_path(), "/bin/sh");
  EXPECT_EQ(second.exit_code, 0) << second.out << second.err;
  EXPECT_NE(second.out.find("jobman-setup: script changed\n"), std::string::npos) << second.out;
  EXPECT_EQ(second.out.find("unchanged"), std::string::npos) << second.out;
  EXPECT_EQ(jobman::test::file_text(dir / "home/runs"), "ran\nran\n");
}

TEST(RemoteSetupScript, AFailingScriptReportsFailedWithItsExitStatus) {
  const TempDir dir;
  const auto plan = jobman::remote::plan_setup(script_config("echo before failing\nexit 3\necho never\n"));
  const auto result = run_plan(dir, plan, system_path(), "/bin/sh");
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.out.find("before failing\njobman-setup: script failed (exit 3)\n"), std::string::npos) << result.out;
  EXPECT_EQ(result.out.find("never"), std::string::npos) << result.out;
  EXPECT_EQ(result.out.find("script changed"), std::string::npos) << result.out;
  EXPECT_NE(result.err.find("jobman: setup.script exited with status 3"), std::string::npos) << result.err;
  // A script the worker lacks (or has damaged) is not run: the module fails as the others do, with no status.
  dir.write("home/.jobman/files/" + plan.files[0].remote_name, "echo damaged\n");
  const auto damaged = jobman::test::run_program(
      {"/bin/sh", "-c", plan.script}, {{{"HOME", (dir / "home").string()}, {"PATH", system_path()}}, "", ""});
  EXPECT_EQ(damaged.exit_code, 1);
  EXPECT_NE(damaged.out.find("jobman-setup: script failed\n"), std::string::npos) << damaged.out;
  EXPECT_EQ(damaged.out.find("damaged"), std::string::npos) << damaged.out;
  EXPECT_NE(damaged.err.find("is missing or damaged"), std::string::npos) << damaged.err;
}

TEST(RemoteSetupScript, RunsInTheVenvActivated) {
  const TempDir dir;
  write_executable(dir, "home/venvs/env/bin/python", "#!/bin/sh\n");
  dir.write("home/venvs/env/bin/activate", "JOBMAN_TEST_ENV=venv; export JOBMAN_TEST_ENV\n");
  // No requirements here: the venv module uses the worker's venv as it is.
  auto config = venv_config("env", (dir / "requirements.txt").string(), "");
  config.setup = jobman::config::SetupSection{"echo \"environment: ${JOBMAN_TEST_ENV:-none}\"\n", ""};
  const auto result = run_plan(dir, jobman::remote::plan_setup(config), system_path());
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("jobman-setup: venv unchanged\n"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("environment: venv\njobman-setup: script changed\n"), std::string::npos) << result.out;
}

TEST(RemoteSetupScript, RunsThroughCondaRunInTheCondaEnvironment) {
  const TempDir dir;
  // A conda that lists the environment ml and runs `run ... bash FILE` as bash FILE with JOBMAN_TEST_ENV set.
  write_executable(dir, "bin/conda",
                   "#!/bin/sh\necho \"$*\" >> " + shell_quote((dir / "calls").string()) +
                       "\ncase \"$1\" in\nenv) echo '# conda environments:'; echo 'ml  /c/envs/ml' ;;\n"
                       "run) while [ \"$1\" != bash ]; do shift; done; JOBMAN_TEST_ENV=conda exec \"$@\" ;;\nesac\n");
  JobConfig config;
  config.job.env_type = EnvType::conda;
  config.conda = jobman::config::CondaSection{"ml", ""};
  config.setup = jobman::config::SetupSection{"echo \"environment: ${JOBMAN_TEST_ENV:-none}\"\n", ""};
  const auto plan = jobman::remote::plan_setup(config);
  ASSERT_EQ(plan.files.size(), 1U);
  const auto result = run_plan(dir, plan, (dir / "bin").string() + ":" + system_path());
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("jobman-setup: conda unchanged\n"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("environment: conda\njobman-setup: script changed\n"), std::string::npos) << result.out;
  EXPECT_EQ(calls(dir), (std::vector<std::string>{
                            "env list", "run --no-capture-output -n ml bash " +
                                            (dir / "home/.jobman/files" / plan.files[0].remote_name).string()}));
}

TEST(RemoteSetupScript, WithDockerRunsOnTheHostNotInAContainer) {
  const TempDir dir;
  write_executable(dir, "bin/docker", "#!/bin/sh\necho \"$*\" >> " + shell_quote((dir / "calls").string()) + "\n");
  JobConfig config;
  config.job.env_type = EnvType::docker;
  config.docker = jobman::config::DockerSection{"img:tag", {}, {}, {}, ""};
  config.setup = jobman::config::SetupSection{"echo \"on the host in $PWD\"\n", ""};
  const auto result = run_plan(dir, jobman::remote::plan_setup(config), (dir / "bin").string() + ":" + system_path());
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("jobman-setup: docker unchanged\n"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("on the host in " + (dir / "home").string() + "\njobman-setup: script changed\n"),
            std::string::npos)
      << result.out;
  EXPECT_EQ(calls(dir), (std::vector<std::string>{"info", "image inspect img:tag"})) << "no container is run";
}

TEST(RemoteSetupScript, HostileScriptTextReachesTheWorkerOnlyAsTheFilesContent) {
  const TempDir dir;
  const auto plan = jobman::remote::plan_setup(script_config(hostile() + "\n"));
  EXPECT_EQ(plan.script.find("touch PWNED"), std::string::npos) << plan.script;
  ASSERT_EQ(plan.files.size(), 1U);
  EXPECT_EQ(plan.files[0].content, hostile() + "\n");
}

// A stand-in gcloud that is one worker on this machine, whose home is $HOME: `ssh` runs the --command text with bash,
// `scp` copies the sources into the destination under $HOME.
fs::path fake_worker_gcloud(const TempDir& dir) {
  return write_executable(
      dir, "gcloud",
      "#!/bin/bash\ncase \"$4\" in\nssh)\n"
      "  for arg in \"$@\"; do case \"$arg\" in --command=*) command=\"${arg#--command=}\" ;; esac; "
      "done\n  exec bash -c \"$command\" < /dev/null ;;\nscp)\n  shift 4; sources=()\n"
      "  for arg in \"$@\"; do case \"$arg\" in --*) ;; *:*) dest=\"${arg#*:}\" ;; "
      "*) sources+=(\"$arg\") ;; esac; done\n"
      "  cp -L \"${sources[@]}\" \"$HOME/$dest/\" ;;\nesac\n");
}

TEST(RemoteRunSetup, TheScriptIsSentOnceAndItsFailureIsTheFailedModuleWithItsExitStatus) {
  const TempDir dir;
  fs::create_directories(dir / "home");
  const jobman::remote::SliceTarget target{fake_worker_gcloud(dir).string(),   "p", "us-central2-b", "node", "", "",
                                           {{"HOME", (dir / "home").string()}}};
  const std::chrono::milliseconds timeout(60000);
  // Lines of the script's own that look like reports do not count: the module's report, which comes last, does.
  const auto failing = jobman::remote::plan_setup(
      script_config("echo 'jobman-setup: script changed'\necho 'jobman-setup: ssh failed'\nexit 3\n"));
  ASSERT_EQ(failing.files.size(), 1U);
  const auto failed = jobman::remote::run_setup(target, {0}, failing, dir / "attempt", timeout);
  ASSERT_EQ(failed.size(), 1U);
  EXPECT_EQ(failed[0].uploaded, std::vector<std::string>{failing.files[0].remote_name});
  EXPECT_EQ(jobman::test::file_text(dir / "home/.jobman/files" / failing.files[0].remote_name),
            failing.files[0].content);
  ASSERT_EQ(failed[0].modules.size(), 1U);
  EXPECT_EQ(failed[0].modules[0].module, "script");
  EXPECT_EQ(failed[0].modules[0].outcome, jobman::remote::ModuleOutcome::failed);
  EXPECT_FALSE(failed[0].ok());
  EXPECT_TRUE(failed[0].error.starts_with("script setup on worker 0 failed (exit 1): ")) << failed[0].error;
  EXPECT_NE(failed[0].error.find("jobman: setup.script exited with status 3"), std::string::npos) << failed[0].error;
  EXPECT_NE(jobman::test::file_text(dir / "attempt/setup-0.log").find("jobman-setup: script failed (exit 3)\n"),
            std::string::npos);
  // A script that succeeds is changed at every setup; once the worker has it, it is not sent again.
  const auto passing = jobman::remote::plan_setup(script_config("echo 'jobman-setup: script failed'\n"));
  for (const bool sent : {true, false}) {
    const auto done = jobman::remote::run_setup(target, {0}, passing, dir / "attempt", timeout);
    ASSERT_EQ(done.size(), 1U);
    EXPECT_TRUE(done[0].ok()) << done[0].error;
    EXPECT_EQ(done[0].uploaded.size(), sent ? 1U : 0U);
    ASSERT_EQ(done[0].modules.size(), 1U);
    EXPECT_EQ(done[0].modules[0].outcome, jobman::remote::ModuleOutcome::changed);
    EXPECT_TRUE(done[0].changed());
  }
}

TEST(RemoteEnvironmentCommand, NoneLeavesItAloneAndVenvActivatesFirst) {
  const TempDir dir;
  JobConfig config;
  EXPECT_EQ(jobman::remote::environment_command(config, hostile()), hostile());
  config.job.env_type = EnvType::venv;
  config.venv = jobman::config::VenvSection{"my env", "", ""};
  const auto text = jobman::remote::environment_command(config, "printf %s \"$X\"");
  EXPECT_EQ(text, "jobman_venv=\"$HOME\"/venvs/'my env'; if [ -f \"$HOME\"/'my env'/bin/activate ]; then "
                  "jobman_venv=\"$HOME\"/'my env'; fi\n. \"$jobman_venv/bin/activate\" || exit 1\nprintf %s \"$X\"");
  dir.write("venvs/my env/bin/activate", "X=activated\n");
  const auto ran = jobman::test::run_program({"/bin/bash", "-c", text}, {{{"HOME", dir.path().string()}}, "", ""});
  EXPECT_EQ(ran.out, "activated");
  // A venv at ~/<name>, where the Python jobman makes it, is the one used.
  dir.write("my env/bin/activate", "X=home-venv\n");
  const auto home = jobman::test::run_program({"/bin/bash", "-c", text}, {{{"HOME", dir.path().string()}}, "", ""});
  EXPECT_EQ(home.out, "home-venv");
  fs::remove(dir / "my env/bin/activate");
  fs::remove(dir / "venvs/my env/bin/activate");
  const auto broken = jobman::test::run_program({"/bin/bash", "-c", text}, {{{"HOME", dir.path().string()}}, "", ""});
  EXPECT_EQ(broken.exit_code, 1);
  EXPECT_EQ(broken.out, "") << "the command must not run outside its venv";
}

TEST(RemoteEnvironmentCommand, CondaRunsTheCommandAsOneBashArgument) {
  const TempDir dir;
  JobConfig config;
  config.job.env_type = EnvType::conda;
  config.conda = jobman::config::CondaSection{"ml env", ""};
  EXPECT_EQ(jobman::remote::environment_command(config, "echo 'hi'"),
            "conda=$(command -v conda 2> /dev/null) || { conda=\"$HOME/miniconda3/bin/conda\"; if [ ! -x \"$conda\" ] "
            "&& [ -x \"$HOME/miniconda/bin/conda\" ]; then conda=\"$HOME/miniconda/bin/conda\"; fi; }\n"
            "exec \"$conda\" run --no-capture-output -n 'ml env' bash -c 'echo '\\''hi'\\'''\n");
  fake_printing_program(dir, "conda");
  EXPECT_EQ(printed_argv(dir, jobman::remote::environment_command(config, hostile())),
            (std::vector<std::string>{"run", "--no-capture-output", "-n", "ml env", "bash", "-c", hostile()}));
  EXPECT_FALSE(fs::exists(dir / "PWNED"));
}

TEST(RemoteEnvironmentCommand, CondaIsTheOneOnPathElseInMiniconda3ElseInThePythonJobmansMiniconda) {
  const TempDir dir;
  JobConfig config;
  config.job.env_type = EnvType::conda;
  config.conda = jobman::config::CondaSection{"ml", ""};
  const auto text = jobman::remote::environment_command(config, "true");
  const auto conda_run = [&] {
    return jobman::test::run_program(
               {"/bin/bash", "-c", text},
               {{{"HOME", (dir / "home").string()}, {"PATH", (dir / "bin").string()}}, "", dir.path().string()})
        .out;
  };
  const std::string prints_itself = "#!/bin/sh\nprintf '%s\\n' \"$0\"\n";
  write_executable(dir, "home/miniconda/bin/conda", prints_itself);
  EXPECT_EQ(conda_run(), (dir / "home/miniconda/bin/conda").string() + "\n");
  write_executable(dir, "home/miniconda3/bin/conda", prints_itself);
  EXPECT_EQ(conda_run(), (dir / "home/miniconda3/bin/conda").string() + "\n");
  write_executable(dir, "bin/conda", prints_itself);
  EXPECT_EQ(conda_run(), (dir / "bin/conda").string() + "\n");
}

TEST(RemoteEnvironmentCommand, DockerPassesTheContractVariablesQuotesItsOwnWordsAndPutsInTheFlagsAsTheyAre) {
  const auto configs = jobman::config::parse_job_configs(
      "job:\n  name: demo\n  env_type: docker\ntpu:\n  accelerator: v4-8\n  zone: us-central2-b\n"
      "  version: tpu-ubuntu2204-base\ncommand:\n  cmd: echo hi\ndocker:\n  image: img:tag\n"
      "  flags: ['--env HOME=/x', '--shm-size=1g']\n  env_vars: ['A=1 2']\n  mount_dirs: [/data]\n"
      "  workdir: /work dir\n",
      "docker.yaml");
  ASSERT_EQ(configs.size(), 1U);
  std::string expected = "if docker info > /dev/null 2>&1; then D=docker; else D=\"sudo -n docker\"; fi\n"
                         "jobman_env_file=\"$(dirname \"$0\")/docker.env\"\n"
                         "(umask 077 && printf '%s' 'A=1 2\n' > \"$jobman_env_file\") || exit 1\n"
                         "exec $D run --rm --name \"$JOBMAN_CONTAINER\"";
  for (const auto& word : passed_jobman_names()) {
    expected += " " + word;
  }
  expected += " --env-file \"$jobman_env_file\" -v '/data:/data' -w '/work dir' --env HOME=/x --shm-size=1g 'img:tag' "
              "bash -c 'echo hi'\n";
  EXPECT_EQ(jobman::remote::environment_command(configs[0], configs[0].command.cmd), expected);
}

TEST(RemoteEnvironmentCommand, DockerArgvSurvivesTheShellWithHostileText) {
  const TempDir dir;
  JobConfig config;
  config.job.env_type = EnvType::docker;
  config.docker = jobman::config::DockerSection{
      "img:" + hostile(), {" --init "}, {"K=" + one_line_hostile(), "PASSED"}, {"/data dir"}, "/w'd"};
  fake_printing_program(dir, "docker");
  const auto argv = printed_argv(dir, jobman::remote::environment_command(config, hostile()),
                                 {{"JOBMAN_CONTAINER", "jobman-job-7-2-w0"}});
  std::vector<std::string> expected = {"run", "--rm", "--name", "jobman-job-7-2-w0"};
  const auto names = passed_jobman_names();
  expected.insert(expected.end(), names.begin(), names.end());
  // An entry that is a name alone is passed on from the worker's environment (-e NAME).
  expected.insert(expected.end(),
                  {"-e", "PASSED", "--env-file", (dir / "docker.env").string(), "-v", "/data dir:/data dir", "-w",
                   "/w'd", "--init", "img:" + hostile(), "bash", "-c", hostile()});
  EXPECT_EQ(argv, expected);
  // The variable's value is in a private file beside run.sh, not on docker's command line.
  EXPECT_EQ(jobman::util::read_file(dir / "docker.env"), "K=" + one_line_hostile() + "\n");
  EXPECT_EQ(fs::status(dir / "docker.env").permissions(), fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_FALSE(fs::exists(dir / "PWNED"));
  // A value over two lines cannot be an env-file line: refused, naming the key.
  config.docker->env_vars = {"K=a\nb"};
  EXPECT_EQ(error_of([&] { jobman::remote::environment_command(config, "true"); }),
            "docker.env_vars: 'K=a' is not one line of the form NAME=value, nor a variable name (letters, digits and "
            "'_', not starting with a digit)");
  // A name alone must be one the shell and docker take.
  for (const std::string name : {"", "1X", "A-B", "A B", "X;touch PWNED", "$(touch PWNED)"}) {
    config.docker->env_vars = {name};
    EXPECT_EQ(error_of([&] { jobman::remote::environment_command(config, "true"); }),
              "docker.env_vars: '" + name +
                  "' is not one line of the form NAME=value, nor a variable name (letters, digits and '_', not "
                  "starting with a digit)");
  }
}

TEST(RemoteEnvironmentCommand, DockerFlagsAreShellTextThatTheWorkersShellQuotesAndExpands) {
  const TempDir dir;
  JobConfig config;
  config.job.env_type = EnvType::docker;
  config.docker = jobman::config::DockerSection{
      "img", {"-e \"A=b c\"", "-v $HOME/x:/x", "-v ~/d:/d", "--shm-size=1g\n"}, {}, {}, ""};
  fake_printing_program(dir, "docker");
  const auto argv = printed_argv(dir, jobman::remote::environment_command(config, "true"),
                                 {{"JOBMAN_CONTAINER", "c"}, {"HOME", "/home/w"}});
  std::vector<std::string> expected = {"run", "--rm", "--name", "c"};
  const auto names = passed_jobman_names();
  expected.insert(expected.end(), names.begin(), names.end());
  expected.insert(expected.end(), {"-e", "A=b c", "-v", "/home/w/x:/x", "-v", "/home/w/d:/d", "--shm-size=1g", "img",
                                   "bash", "-c", "true"});
  EXPECT_EQ(argv, expected);
  // A flag over two lines would end docker's command line half-way: refused, naming it.
  config.docker->flags = {"-e A=1\n-e B=2"};
  EXPECT_EQ(error_of([&] { jobman::remote::environment_command(config, "true"); }),
            "docker.flags: '-e A=1' is not one line");
}

TEST(RemoteWorkloadEnvironment, EveryContractVariableHasItsValue) {
  jobman::remote::LaunchSpec spec;
  spec.id = {"job-7", 1};
  spec.num_workers = 4;
  spec.tpu_name = "job-7-a1";
  spec.zone = "us-central2-b";
  spec.accelerator = "v4-32";
  spec.extra_env = {{"FOO", "bar"}, {"JOBMAN_JOB_ID", "spoofed"}};
  const std::map<std::string, std::string> first = {{"FOO", "bar"},
                                                    {"JOBMAN_ACCELERATOR", "v4-32"},
                                                    {"JOBMAN_ATTEMPT", "1"},
                                                    {"JOBMAN_JOB_ID", "job-7"},
                                                    {"JOBMAN_NUM_SLICES", "1"},
                                                    {"JOBMAN_NUM_WORKERS", "4"},
                                                    {"JOBMAN_RESUME", "0"},
                                                    {"JOBMAN_SLICE_ID", "0"},
                                                    {"JOBMAN_TPU_NAME", "job-7-a1"},
                                                    {"JOBMAN_WORKER_ID", "2"},
                                                    {"JOBMAN_ZONE", "us-central2-b"}};
  EXPECT_EQ(jobman::remote::workload_environment(spec, 2), first);
  spec.id.attempt = 3;
  spec.docker = true;
  auto later = first;
  later["JOBMAN_ATTEMPT"] = "3";
  later["JOBMAN_RESUME"] = "1";
  later["JOBMAN_WORKER_ID"] = "0";
  later["JOBMAN_CONTAINER"] = "jobman-job-7-3-w0";
  EXPECT_EQ(jobman::remote::workload_environment(spec, 0), later);
  spec.id.attempt = 2;
  EXPECT_EQ(jobman::remote::workload_environment(spec, 0).at("JOBMAN_RESUME"), "1");
}

TEST(RemoteWorkloadEnvironment, EachWorkerOfAMultisliceJobKnowsItsSliceAndTheCoordinator) {
  jobman::remote::LaunchSpec spec;
  spec.id = {"job-8", 1};
  spec.num_workers = 6;
  spec.num_slices = 3;
  spec.coordinator = "127.16.0.5";
  for (int w = 0; w < 6; ++w) {
    const auto env = jobman::remote::workload_environment(spec, w);
    EXPECT_EQ(env.at("JOBMAN_WORKER_ID"), std::to_string(w));
    EXPECT_EQ(env.at("JOBMAN_NUM_WORKERS"), "6");
    EXPECT_EQ(env.at("JOBMAN_SLICE_ID"), std::to_string(w / 2));
    EXPECT_EQ(env.at("JOBMAN_NUM_SLICES"), "3");
    EXPECT_EQ(env.at("MEGASCALE_SLICE_ID"), std::to_string(w / 2));
    EXPECT_EQ(env.at("MEGASCALE_NUM_SLICES"), "3");
    EXPECT_EQ(env.at("MEGASCALE_COORDINATOR_ADDRESS"), "127.16.0.5") << "the same for every worker";
    EXPECT_EQ(env.at("MEGASCALE_PORT"), "8081");
  }
  // One slice: no MEGASCALE_* variable, which would tell JAX to look for other slices.
  spec.num_slices = 1;
  EXPECT_FALSE(jobman::remote::workload_environment(spec, 0).contains("MEGASCALE_NUM_SLICES"));
}

TEST(RemoteGcloudArgv, AHostOfAnotherSlicesNodeIsReachedThroughThatNodeAndItsOwnIndex) {
  jobman::remote::SliceTarget target{"gcloud", "proj", "us-central2-b", "ms", "", "/k/id", {}};
  target.hosts = {{"127.16.0.1", 22, "", "ms-0", 0},
                  {"127.16.0.2", 22, "", "ms-0", 1},
                  {"127.16.0.3", 22, "", "ms-1", 0},
                  {"127.16.0.4", 22, "", "ms-1", 1}};
  EXPECT_EQ(
      jobman::remote::ssh_argv(target, 3, "true"),
      (std::vector<std::string>{"gcloud", "compute", "tpus", "tpu-vm", "ssh", "ms-1", "--zone=us-central2-b",
                                "--project=proj", "--worker=1", "--ssh-key-file=/k/id", "--quiet", "--command=true"}));
  EXPECT_EQ(
      jobman::remote::scp_argv(target, 2, {"f"}, "/x"),
      (std::vector<std::string>{"gcloud", "compute", "tpus", "tpu-vm", "scp", "f", "ms-1:/x", "--zone=us-central2-b",
                                "--project=proj", "--worker=0", "--ssh-key-file=/k/id", "--quiet"}));
  // OpenSSH goes to the host's own address whatever its node.
  target.transport = jobman::config::Transport::ssh;
  const auto argv = jobman::remote::ssh_argv(target, 3, "true");
  EXPECT_EQ(argv[argv.size() - 2], "127.16.0.4");
}

TEST(RemoteWorkloadNames, DirectoryContainerLogAndStateNamesFollowTheWorkload) {
  EXPECT_EQ(jobman::remote::remote_workload_dir({"job-7", 3}), ".jobman/jobs/job-7/attempt-3");
  EXPECT_EQ(jobman::remote::container_name({"job-7", 3}, 5), "jobman-job-7-3-w5");
  EXPECT_EQ(jobman::remote::worker_log_path("/a/b", 2), fs::path("/a/b/worker-2.log"));
  using jobman::remote::WorkloadState;
  const std::vector<std::pair<WorkloadState, std::string>> names = {
      {WorkloadState::absent, "absent"},     {WorkloadState::starting, "starting"},
      {WorkloadState::running, "running"},   {WorkloadState::exited, "exited"},
      {WorkloadState::vanished, "vanished"}, {WorkloadState::unreachable, "unreachable"}};
  for (const auto& [state, name] : names) {
    EXPECT_EQ(jobman::remote::to_string(state), name);
  }
}

TEST(RemoteWorkloadId, ABadIdIsRejectedBeforeAnythingRuns) {
  const TempDir dir;
  const jobman::remote::SliceTarget target{(dir / "no-such-gcloud").string(), "p", "z", "node", "", "", {}};
  const std::vector<jobman::remote::WorkloadId> bad = {{"a/b", 1}, {"..", 1},   {"a..b", 1},  {"a b", 1}, {"", 1},
                                                       {"job", 0}, {"job", -1}, {"$(id)", 1}, {"j;x", 1}, {"j\nx", 1}};
  const std::chrono::milliseconds timeout(1000);
  const auto invalid = [](const std::string& message) { return message.starts_with("invalid workload id"); };
  fs::create_directories(dir / "attempt");
  for (const auto& id : bad) {
    jobman::remote::LaunchSpec spec;
    spec.id = id;
    spec.command = "true";
    EXPECT_PRED1(invalid, error_of([&] { jobman::remote::launch(target, {0}, spec, timeout); }));
    EXPECT_PRED1(invalid, error_of([&] { jobman::remote::query(target, {0}, id, timeout); }));
    EXPECT_PRED1(invalid, error_of([&] { jobman::remote::stop(target, {0}, id, timeout, timeout); }));
    EXPECT_PRED1(invalid, error_of([&] { jobman::remote::attach(target, {0}, id, dir / "attempt"); }));
    EXPECT_FALSE(fs::exists(jobman::remote::worker_log_path(dir / "attempt", 0))) << id.job_id;
  }
}

TEST(RemoteWorkloadId, LaunchRejectsAnExtraVariableThatIsNotAShellName) {
  const jobman::remote::SliceTarget target{"/nonexistent/gcloud", "p", "z", "node", "", "", {}};
  for (const std::string name : {"", "1X", "A-B", "A B", "X;id"}) {
    jobman::remote::LaunchSpec spec;
    spec.id = {"job-7", 1};
    spec.extra_env = {{name, "v"}};
    const auto message = error_of([&] { jobman::remote::launch(target, {0}, spec, std::chrono::milliseconds(1000)); });
    EXPECT_EQ(message, "invalid environment variable name '" + name + "'");
  }
}

} // namespace remote_plan_test
