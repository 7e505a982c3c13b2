// jobman ui: keeps the page the server rendered up to date. Every second it asks what changed since the last change
// it saw and places the rows the server rendered; the selected job's panel and log tail are fetched every 2 seconds,
// the report every minute. Stored text arrives escaped (HTML) or is set as text; nothing is built from it here.
'use strict';

(function () {
  const token = new URLSearchParams(window.location.search).get('token') || '';
  const body = document.body;
  const tbody = document.querySelector('#jobs tbody');
  const live = document.getElementById('live');
  const panel = document.getElementById('panel');
  const empty = document.getElementById('empty');
  const filter = document.getElementById('filter');
  const since = document.getElementById('since');
  const report = document.getElementById('report');
  let cursor = Number(body.dataset.cursor);
  // The server's clock minus this one's, so that ages count from the server's time.
  let skew = Number(body.dataset.now) - Date.now();
  let kind = 'all';
  let selected = null;
  let log = { worker: 0, kind: 'output' };
  let lastPoll = Date.now();

  function api(path) {
    return fetch(path, { headers: { 'X-Jobman-Token': token }, cache: 'no-store' }).then((r) => {
      if (!r.ok) {
        return r.text().then((t) => {
          throw new Error(r.status + ' ' + t.trim());
        });
      }
      return r.json();
    });
  }

  // The age as `jobman list` writes it.
  function age(seconds) {
    seconds = Math.max(0, Math.floor(seconds));
    const pad = (n) => String(n).padStart(2, '0');
    if (seconds < 60) return seconds + 's';
    if (seconds < 3600) return Math.floor(seconds / 60) + 'm';
    if (seconds < 86400) return Math.floor(seconds / 3600) + 'h' + pad(Math.floor((seconds % 3600) / 60)) + 'm';
    return Math.floor(seconds / 86400) + 'd' + pad(Math.floor((seconds % 86400) / 3600)) + 'h';
  }

  function refreshAges() {
    const now = Date.now() + skew;
    for (const cell of tbody.querySelectorAll('td[data-since]')) {
      cell.textContent = age((now - Number(cell.dataset.since)) / 1000);
    }
  }

  function visible(row) {
    if (kind !== 'all' && row.dataset.kind !== kind) return false;
    const words = filter.value.trim().toLowerCase();
    return !words || words.split(/\s+/).every((w) => row.dataset.search.toLowerCase().includes(w));
  }

  // The count cards, the filters and the empty note follow the rows.
  function recount() {
    const groups = { running: 0, waiting: 0, recovering: 0, succeeded: 0, failed: 0 };
    const group = {
      RUNNING: 'running', SETUP: 'waiting', PROVISIONING: 'waiting', QUEUED: 'waiting', PENDING: 'waiting',
      RECOVERING: 'recovering', SUCCEEDED: 'succeeded', FAILED: 'failed',
    };
    let shown = 0;
    for (const row of tbody.rows) {
      const g = group[row.dataset.phase];
      if (g) groups[g] += 1;
      row.hidden = !visible(row);
      if (!row.hidden) shown += 1;
      row.classList.toggle('selected', row.dataset.id === String(selected));
    }
    for (const cell of document.querySelectorAll('[data-count]')) {
      cell.textContent = groups[cell.dataset.count];
    }
    empty.hidden = shown > 0;
  }

  function rowFromHtml(html) {
    const holder = document.createElement('tbody');
    holder.innerHTML = html;
    return holder.firstElementChild;
  }

  // Puts a rendered row in place of the job's old one, or among the rows in id order.
  function place(id, html) {
    const row = rowFromHtml(html);
    const old = tbody.querySelector('tr[data-id="' + id + '"]');
    if (old) {
      old.replaceWith(row);
      return;
    }
    for (const other of tbody.rows) {
      if (Number(other.dataset.id) > id) {
        tbody.insertBefore(row, other);
        return;
      }
    }
    tbody.appendChild(row);
  }

  function setLive(ok, text) {
    live.textContent = text;
    live.classList.toggle('down', !ok);
  }

  function poll() {
    // A tab that slept for long may have missed removals the store no longer keeps: start again.
    if (Date.now() - lastPoll > 5 * 60 * 1000) {
      window.location.reload();
      return;
    }
    api('/api/changes?after=' + cursor)
      .then((changes) => {
        lastPoll = Date.now();
        if (changes.reload) {
          window.location.reload();
          return;
        }
        skew = changes.now_ms - Date.now();
        let selectedChanged = false;
        for (const row of changes.rows) {
          place(row.id, row.html);
          selectedChanged = selectedChanged || row.id === selected;
        }
        for (const id of changes.removed) {
          const old = tbody.querySelector('tr[data-id="' + id + '"]');
          if (old) old.remove();
          if (id === selected) closePanel();
        }
        cursor = changes.cursor;
        if (changes.rows.length || changes.removed.length) {
          refreshAges();
          recount();
        }
        if (selectedChanged) showJob(selected);
        setLive(true, 'live \u00b7 ' + new Date(changes.now_ms).toLocaleTimeString());
      })
      .catch((e) => setLive(false, 'not updating: ' + e.message))
      .finally(() => window.setTimeout(poll, 1000));
  }

  function closePanel() {
    selected = null;
    panel.innerHTML = '<p class="note">Select a job to see where its time went, its attempts and the end of its logs.</p>';
    history.replaceState(null, '', window.location.pathname + window.location.search);
    recount();
  }

  // The panel the server rendered, then the log selector and the log's end as text.
  function showJob(id) {
    const wanted = id;
    const query = '/api/job?id=' + id + '&worker=' + log.worker + '&log=' + log.kind;
    return api(query)
      .then((job) => {
        if (selected !== wanted) return;
        const pre = panel.querySelector('pre.log');
        const atEnd = !pre || pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
        panel.innerHTML = job.html;
        const head = document.createElement('h3');
        head.textContent = 'Log ';
        const choose = document.createElement('select');
        choose.setAttribute('aria-label', 'log');
        for (const k of ['output', 'setup']) {
          for (let w = 0; w < job.log.workers; w += 1) {
            const option = document.createElement('option');
            option.value = k + ':' + w;
            option.textContent = (k === 'output' ? 'worker ' : 'setup, worker ') + w;
            option.selected = k === job.log.kind && w === job.log.worker;
            choose.appendChild(option);
          }
        }
        choose.addEventListener('change', () => {
          const [k, w] = choose.value.split(':');
          log = { kind: k, worker: Number(w) };
          showJob(selected);
        });
        head.appendChild(choose);
        const note = document.createElement('span');
        note.className = 'm';
        note.textContent = ' ' + job.log.note;
        head.appendChild(note);
        const text = document.createElement('pre');
        text.className = 'log';
        text.textContent = job.log.text || '(nothing yet)';
        panel.appendChild(head);
        panel.appendChild(text);
        if (atEnd) text.scrollTop = text.scrollHeight;
        panel.querySelector('#close').addEventListener('click', closePanel);
      })
      .catch((e) => {
        if (selected === wanted) {
          panel.textContent = 'Job ' + wanted + ': ' + e.message;
        }
      });
  }

  function select(id) {
    if (selected !== id) log = { worker: 0, kind: 'output' };
    selected = id;
    history.replaceState(null, '', window.location.pathname + window.location.search + '#job=' + id);
    recount();
    showJob(id);
  }

  function loadReport() {
    api('/api/report?since=' + encodeURIComponent(since.value))
      .then((r) => {
        report.innerHTML = r.html;
        report.classList.remove('note');
      })
      .catch((e) => {
        report.textContent = 'The report could not be read: ' + e.message;
      });
  }

  tbody.addEventListener('click', (event) => {
    const row = event.target.closest('tr[data-id]');
    if (row) select(Number(row.dataset.id));
  });
  for (const button of document.querySelectorAll('button[data-kind]')) {
    button.addEventListener('click', () => {
      kind = button.dataset.kind;
      for (const b of document.querySelectorAll('button[data-kind]')) b.classList.toggle('on', b === button);
      recount();
    });
  }
  filter.addEventListener('input', recount);
  since.addEventListener('change', loadReport);

  const fromHash = /^#job=(\d+)$/.exec(window.location.hash);
  if (fromHash) select(Number(fromHash[1]));
  recount();
  loadReport();
  window.setTimeout(poll, 1000);
  window.setInterval(refreshAges, 5000);
  window.setInterval(() => {
    if (selected !== null) showJob(selected);
  }, 2000);
  window.setInterval(loadReport, 60000);
})();
