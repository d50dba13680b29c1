// digest: sha256:63e84469946b7fa2a4baf9931f300ec862c4b035466d4a64129e5d714d1ad61a
const who = async () => await sleep("5h")
const out = await race({ fast: () => sleep("1s"), who, slow: async function () { await sleep("1h"); return `${"a"}b${1}` } })
