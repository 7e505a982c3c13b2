// A worker host's own filesystem: the mount namespace each session on a host runs in. Its / is the host's root
// directory in the sandbox, so /mnt, /srv, /opt, /tmp and any directory a job makes at the top are the host's own:
// kept across its sessions, private from other hosts, wiped with the host. This machine's system directories (/usr,
// /etc, /bin, /lib*, /var, ...) are there read-only, /proc, /dev and /sys are this machine's (/proc/sys read-only,
// /dev/shm the host's own), /home holds only /home/USER, the host's home, and the mock's own directories the host
// needs (its sandbox, the buckets, the tools) are bound back at their own paths.
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace jobman::mock {

// What a session enters a worker host with (the options of jobman-mock-host-login).
struct HostFilesystem {
  std::filesystem::path root;                        // The host's /, a directory of this machine (the sandbox's root/).
  std::filesystem::path home_source;                 // The host's home, a directory of this machine: /home/USER there.
  std::string user;                                  // USER: the one directory under /home.
  std::vector<std::filesystem::path> keep;           // The mock's directories the host writes to, at their own paths.
  std::vector<std::filesystem::path> keep_read_only; // The mock's directories the host only reads (its tools).
  // When set, /home is this directory of this machine, holding one home per account, instead of a tmpfs holding
  // home_source alone; the process then starts in /, and `user` is not needed.
  std::filesystem::path homes;
  // When set, a directory holding the host's own passwd, group and shadow, bound over /etc's (each that exists in
  // both): the host's accounts. The mock rewrites them in place, so the bound files stay the same files.
  std::filesystem::path accounts;
  // When set, the mock's Cloud Storage (its directory of buckets), bound at /run/mock-gcs too: a path every account of
  // the host can reach, whatever the modes of the directories around the mock's own.
  std::filesystem::path gcs;
  // When set, the host's sandbox, bound at /run/mock-host too, for the same reason: the mock's tools keep the host's
  // own state there (docker's images and containers), whichever account runs them.
  std::filesystem::path sandbox;
  // When set, the host's hostname, in a UTS namespace of its own.
  std::string hostname;
  // For a server that switches to the host's accounts (its sshd): root's last user namespace maps every uid and gid
  // to itself and keeps setgroups, instead of mapping root alone.
  bool every_user = false;
};

// A step of entering a host that failed, in words that name the step and the system's reason.
class HostEntryError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// Set (to "1") in the environment of every session that runs on its host's own filesystem: the mock's tools then take
// every absolute path as the host's, where without it only the sandbox is the host's.
inline constexpr const char* kOwnFilesystemVariable = "MOCK_TPU_OWN_FILESYSTEM";

// True for a top-level directory of this machine that a host sees read-only: usr, etc, bin, sbin, lib*, var, boot,
// nix, snap.
bool is_system_directory(std::string_view name);

// True when `user` can be the one directory under /home: letters, digits, '.', '_' and '-', at most 64, not starting
// with '-' or '.'.
bool valid_host_user(std::string_view user);

// Moves this process, which must be single-threaded, onto the host's filesystem (see the top of this file) and into
// /home/USER (/ with `homes`), in a mount namespace of its own that every descendant inherits. As root a user namespace
// mapping root to itself is made last, which locks the mounts (a job cannot remount /usr writable or reach this
// machine's root through /proc/1/root); any other user gets one first, mapping its own uid and gid, and runs without
// privileges. Throws HostEntryError when a step fails; the process is then half-moved and should exit.
void enter_host_filesystem(const HostFilesystem& host);

} // namespace jobman::mock
