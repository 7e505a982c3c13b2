// A job as `create` would record it, for tests of the store: a spot v4-8 in us-central2-b.
#pragma once

#include "jobman/domain/job.hpp"

#include <string>

namespace jobman::test {

// Job `name` of `user`, its config at /home/<user>/<name>.yaml.
inline domain::NewJob make_job(const std::string& name, const std::string& user = "alice") {
  domain::NewJob job;
  job.name = name;
  job.user = user;
  job.accelerator = "v4-8";
  job.zone = "us-central2-b";
  job.pricing = domain::Pricing::spot;
  job.tpu_name = "jobman-" + name;
  job.hosts = 1;
  job.config_path = "/home/" + user + "/" + name + ".yaml";
  job.config_yaml = "name: " + name + "\n";
  return job;
}

} // namespace jobman::test
