// The edit and operate screens of issue 15's leftovers, in a real Chromium
// (see lib.mjs): a connector KB's settings, suite checks beyond contains,
// cancelling a dataset generation, the graph's labels, an MCP tool's test
// call, and the administration edits (a user's role and department, a
// department's name, a model provider's details). tests/web/edits_test.go
// starts the platform and runs this script.
//
// Environment: BASE_URL, SHOTS, CONTROL_URL (POST /release/generation lets
// the held generation answers go on), MCP_URL (tests/mcpfixture: tools add
// and echo), DIFY_URL (a fake Dify service API: dataset ds-1, key
// dify-secret-key), CHROMIUM.
import { run, authed } from './lib.mjs'

const base = process.env.BASE_URL
const shots = process.env.SHOTS

await run('edits', shots, async ({ page, log, shot, fail }) => {
  const api = (path, init) => authed(page, path, init)
  const okJSON = async (path, init) => {
    const r = await api(path, init)
    if (r.status < 200 || r.status > 299) fail(`${init?.method ?? 'GET'} ${path}: ${r.status} ${JSON.stringify(r.body)}`)
    return r.body
  }
  const post = (path, body, method = 'POST') => okJSON(path, { method, body: JSON.stringify(body) })
  const saved = () => page.getByRole('status').filter({ hasText: 'Saved.' }).waitFor()

  log('first run')
  await page.goto(base + '/login')
  await page.getByRole('heading', { name: 'Create the superadmin' }).waitFor()
  await page.fill('#uid', 'admin')
  await page.fill('#password', 'admin-password-1')
  await page.getByRole('button', { name: 'Create' }).click()
  await page.waitForURL('**/chat**')

  // Setup through the API: a KB with one indexed document, an agent, an MCP
  // server, a department with a user, a provider, a Dify KB (wrong dataset).
  log('setup')
  const kbId = (await post('/api/knowledge/databases', { database_name: 'Handbook', description: '' })).kb_id
  const up = await page.evaluate(async ([kbId, text]) => {
    const f = new FormData()
    f.append('file', new Blob([text], { type: 'text/markdown' }), 'handbook.md')
    const r = await fetch(`/api/knowledge/files/upload?kb_id=${kbId}`, { method: 'POST', headers: { Authorization: 'Bearer ' + localStorage.getItem('yuxi.token') }, body: f })
    return r.json()
  }, [kbId, '# Handbook\n\nEmployees get 25 days of paid vacation per year.\n\n## Travel\n\nBook trains in second class.\n'])
  await post(`/api/knowledge/databases/${kbId}/documents`, { items: [up.file_path], params: { auto_index: true } })
  await post('/api/agent', { name: 'Plain', slug: 'plain' })
  await post('/api/system/mcp-servers', { name: 'Fixture', slug: 'fixture', transport: 'streamable_http', url: process.env.MCP_URL })
  const dept = await post('/api/departments', { name: 'sales', description: 'the sales team', admin_uid: 'sales-admin', admin_password: 'password-sales-1' })
  const clerk = await post('/api/auth/users', { uid: 'clerk', username: 'clerk', password: 'password-clerk-1', role: 'user', department_id: null })
  await post('/api/system/model-providers', { provider_id: 'acme', display_name: 'Acme', provider_type: 'openai', base_url: 'https://1.1.1.1/v1', api_key: 'sk-acme-1',
    capabilities: ['chat'], is_enabled: true, enabled_models: [{ id: 'acme-chat', type: 'chat', source: 'manual', display_name: 'Acme Chat' }] })
  const difyId = (await post('/api/knowledge/databases', { database_name: 'Dify docs', description: '', kb_type: 'dify',
    additional_params: { dify_api_url: process.env.DIFY_URL, dify_token: 'dify-secret-key', dify_dataset_id: 'ds-0' } })).kb_id

  // 1. The Dify KB's settings: the key shows as ********, the dataset id is
  // corrected, the key kept (the query test is answered with it).
  log('connector KB settings')
  await page.goto(`${base}/knowledge/${difyId}`)
  await page.getByTestId('kb-readonly').locator('dd[data-param=dify_dataset_id]').getByText('ds-0').waitFor()
  await page.getByTestId('kb-edit').click()
  const ef = page.getByTestId('kb-edit-form')
  if (await ef.locator('#kbe-dify_token').inputValue() !== '********') fail('the stored key is not shown as ********')
  if (await ef.locator('#kbe-dify_token').getAttribute('type') !== 'password') fail('the key is not a password input')
  await ef.locator('#kbe-name').fill('Dify manual')
  await ef.locator('#kbe-dify_dataset_id').fill('ds-1')
  await shot('kb-edit-dify')
  await page.getByTestId('kb-edit-save').click()
  await saved()
  await page.getByRole('heading', { name: 'Dify manual' }).waitFor()
  await page.getByTestId('kb-readonly').locator('dd[data-param=dify_dataset_id]').getByText('ds-1').waitFor()
  const dq = page.getByTestId('query-test')
  await dq.getByTestId('qt-query').fill('refunds')
  await dq.getByTestId('qt-run').click()
  await dq.getByTestId('qt-results').getByText('Dify says: refunds is in the manual.').waitFor()
  if ((await page.content()).includes('dify-secret-key')) fail('the Dify key is shown on the page')

  // 2. The knowledge graph's labels: listed, filtered, and one picked.
  log('graph labels')
  await page.goto(`${base}/knowledge/${kbId}`)
  await page.locator('[data-testid=kb-files] tr[data-status=indexed][data-file="handbook.md"]').waitFor({ timeout: 60000 })
  await page.getByTestId('kbtab-graph').click()
  const gp = page.getByTestId('graph-panel')
  await gp.getByTestId('graph-model').selectOption('fake:test-model')
  await gp.getByTestId('graph-build').click()
  await gp.locator('[data-testid=graph-status][data-status=done]').waitFor({ timeout: 60000 })
  const labels = gp.getByTestId('graph-labels')
  await labels.getByText('Labels (3)').waitFor() // the entity types: benefit, group, transport
  await labels.getByTestId('graph-label-filter').fill('ben')
  await labels.locator('button[data-label=benefit]').waitFor()
  if (await labels.locator('button[data-label=transport]').count()) fail('the label filter kept transport')
  await Promise.all([page.waitForResponse((r) => r.url().includes('/api/graph/subgraph') && r.url().includes('node_label=benefit') && r.ok()),
    labels.locator('button[data-label=benefit]').click()])
  await labels.locator('button[data-label=benefit][aria-pressed=true]').waitFor()
  await gp.locator('[data-testid=graph-node][data-label="Paid vacation"]').waitFor()
  if (await gp.getByTestId('graph-label').inputValue() !== 'benefit') fail('the picked label is not the subgraph label')
  await shot('graph-labels')

  // 3. A dataset generation, held at its first batch, is cancelled: the row
  // shows the cancel asked, then (the batch released) cancelled, resumable.
  log('cancel a generation')
  await gp.waitFor()
  await page.getByTestId('kbtab-eval').click()
  const evp = page.getByTestId('eval-panel')
  await evp.getByTestId('gen-name').fill('held-bench')
  await evp.getByLabel('Questions').fill('12') // batches of 10: the cancel lands between the two
  await evp.getByTestId('gen-model').selectOption('fake:test-model')
  await evp.getByTestId('generate-start').click()
  const genRow = evp.locator('[data-testid=dataset-table] tr[data-dataset=held-bench]')
  await genRow.getByTestId('dataset-cancel').click()
  await evp.getByRole('status').filter({ hasText: 'Cancel requested' }).waitFor()
  await genRow.getByTestId('generation-cancelling').waitFor()
  await fetch(`${process.env.CONTROL_URL}/release/generation`, { method: 'POST' }).then((r) => { if (!r.ok) fail('release ' + r.status) })
  await evp.locator('[data-testid=dataset-table] tr[data-dataset=held-bench][data-status=cancelled]').waitFor({ timeout: 60000 })
  await genRow.getByTestId('dataset-resume').waitFor()
  const held = (await okJSON(`/api/evaluation/databases/${kbId}/datasets`)).data.find((d) => d.name === 'held-bench')
  if (held?.item_count !== 10) fail('the cancelled generation: ' + JSON.stringify(held))
  await shot('generation-cancelled')

  // 4. Suite items with regex, judge and JSON-schema checks; the run shows
  // each check's verdict (the judge's score and reasoning).
  log('suite checks')
  await page.getByRole('link', { name: 'Evaluation' }).click()
  await page.getByTestId('suite-new').click()
  const sf = page.getByTestId('suite-form')
  await sf.getByLabel('Name', { exact: true }).fill('checks')
  await sf.getByLabel('Agent').selectOption('plain')
  const item0 = sf.locator('[data-item="0"]')
  await item0.getByTestId('suite-input').fill('Say something short')
  await item0.getByTestId('suite-add-check').click()
  await item0.getByTestId('suite-check-value').nth(0).fill('^OK')
  await item0.getByTestId('suite-add-check').click()
  await item0.getByTestId('suite-check-type').nth(1).selectOption('judge')
  await item0.getByTestId('suite-check-value').nth(1).fill('Is the answer polite?')
  await item0.getByTestId('suite-check-threshold').fill('0.7')
  await sf.getByTestId('suite-judge').selectOption('fake:test-model')
  await sf.getByTestId('suite-add-item').click()
  const item1 = sf.locator('[data-item="1"]')
  await item1.getByTestId('suite-input').fill('Answer in JSON')
  await item1.getByTestId('suite-add-check').click()
  await item1.getByTestId('suite-check-type').selectOption('json_schema')
  await item1.getByTestId('suite-check-value').fill('{"type":"object","required":["answer"]}')
  await shot('suite-checks-form')
  await page.getByTestId('suite-create').click()
  await page.getByTestId('suite-detail').getByRole('heading', { name: 'checks' }).waitFor()
  const suite = (await okJSON('/api/evaluation/suites')).data.find((x) => x.name === 'checks')
  const c0 = suite?.items?.[0]?.checks ?? []
  if (suite?.judge_llm !== 'fake:test-model' || c0[0]?.type !== 'regex' || c0[0]?.pattern !== '^OK' || c0[1]?.type !== 'judge' || c0[1]?.prompt !== 'Is the answer polite?' ||
    c0[1]?.threshold !== 0.7 || suite.items[1].checks?.[0]?.type !== 'json_schema' || suite.items[1].checks[0].schema?.required?.[0] !== 'answer') fail('stored suite: ' + JSON.stringify(suite))
  await page.getByTestId('suite-run').click()
  await page.locator('[data-testid=suite-runs] tr[data-status=completed]').waitFor({ timeout: 90000 })
  const sItems = page.getByTestId('suite-run-items')
  const r0 = sItems.locator('tr[data-passed=true]').filter({ hasText: 'Say something short' })
  await r0.locator('li[data-check=regex][data-passed=true]').waitFor()
  await r0.locator('li[data-check=judge][data-passed=true]').filter({ hasText: '0.90' }).filter({ hasText: 'short and polite' }).waitFor()
  await sItems.locator('tr[data-passed=false]').filter({ hasText: 'Answer in JSON' }).locator('li[data-check=json_schema][data-passed=false]').filter({ hasText: 'not JSON' }).waitFor()
  await shot('suite-checks-results')

  // 5. An MCP tool's test call: the arguments editor starts from the tool's
  // parameters; invalid JSON is refused in the page; the result is shown.
  log('mcp tool test call')
  await page.goto(`${base}/admin/mcp`)
  const fxRow = page.locator('[data-testid=mcp-table] tr[data-mcp=fixture]')
  await fxRow.getByTestId('mcp-tools').click()
  const add = page.locator('[data-testid=mcp-tool-list] li[data-tool=add]')
  await add.getByTestId('mcp-test').click()
  const argsBox = add.getByTestId('mcp-args')
  const skeleton = JSON.parse(await argsBox.inputValue())
  if (!('a' in skeleton) || !('b' in skeleton)) fail('the arguments editor does not start from the parameters: ' + JSON.stringify(skeleton))
  await argsBox.fill('{"a": 2,')
  await add.getByTestId('mcp-call').click()
  await add.getByTestId('mcp-call-error').getByText('Invalid JSON').waitFor()
  await argsBox.fill('{"a": 2, "b": 3}')
  await add.getByTestId('mcp-call').click()
  await add.locator('[data-testid=mcp-result][data-error=false]').getByText('The sum of 2 and 3 is 5.').waitFor()
  await shot('mcp-test-call')

  // 6. Administration: a user's role and department, a department's name,
  // a model provider's details (its key kept).
  log('admin edits')
  await page.getByTestId('tab-users').click()
  const clerkRow = page.locator('[data-testid=user-table] tr[data-user=clerk]')
  const userPut = () => page.waitForResponse((r) => r.url().endsWith(`/api/auth/users/${clerk.id}`) && r.request().method() === 'PUT' && r.ok())
  await Promise.all([userPut(), clerkRow.getByTestId('user-dept').selectOption({ label: 'sales' })])
  await Promise.all([userPut(), clerkRow.getByTestId('user-role').selectOption('admin')])
  await saved()
  const cu = await okJSON(`/api/auth/users/${clerk.id}`)
  if (cu.role !== 'admin' || cu.department_id !== dept.id) fail('the clerk: ' + JSON.stringify(cu))
  const deptRow = page.locator('[data-testid=dept-table] tr[data-dept=sales]')
  await deptRow.getByTestId('dept-edit').click()
  await deptRow.getByTestId('dept-name').fill('field sales')
  await deptRow.getByTestId('dept-save').click()
  await page.locator('[data-testid=dept-table] tr[data-dept="field sales"]').waitFor()
  if ((await okJSON(`/api/departments/${dept.id}`)).name !== 'field sales') fail('the department was not renamed')
  await shot('admin-users-edit')
  await page.getByTestId('tab-providers').click()
  await page.locator('[data-testid=provider-table] tr[data-provider=acme]').getByTestId('provider-edit').click()
  const pf = page.getByTestId('provider-edit-form')
  if (await pf.locator('#ep-key').inputValue() !== '') fail('the provider key is shown')
  await pf.locator('#ep-name').fill('Acme Cloud')
  await pf.locator('#ep-url').fill('https://1.1.1.2/v1')
  await pf.locator('#ep-models').fill('acme-chat, acme-large')
  await shot('admin-provider-edit')
  await page.getByTestId('provider-save').click()
  await page.locator('[data-testid=provider-table] tr[data-provider=acme]').getByText('Acme Cloud').waitFor()
  const pv = (await okJSON('/api/system/model-providers')).data.find((x) => x.provider_id === 'acme')
  if (pv?.base_url !== 'https://1.1.1.2/v1' || !pv.has_api_key || pv.enabled_models.map((m) => m.id).join() !== 'acme-chat,acme-large') fail('the provider: ' + JSON.stringify(pv))

  // 7. The new labels in Chinese.
  log('zh')
  await page.getByTestId('lang').click()
  await page.locator('[data-testid=provider-table] tr[data-provider=acme]').getByRole('button', { name: '编辑' }).waitFor()
  await page.goto(`${base}/admin/mcp`)
  await fxRow.getByTestId('mcp-tools').click()
  await add.getByRole('button', { name: '测试' }).click()
  await add.getByText('参数（JSON 对象）').waitFor()
  await page.goto(`${base}/knowledge/${kbId}?tab=graph`)
  await gp.getByText('标签（3）').waitFor()
  await shot('graph-labels-zh')
})
